package report_test

import (
	"fmt"

	"github.com/kretry/kretry/internal/report"
)

func ExampleBytes() {
	fmt.Println(report.Bytes(512), report.Bytes(12<<10), report.Bytes(3565158))
	// Output: 512 B 12.0 KiB 3.4 MiB
}
