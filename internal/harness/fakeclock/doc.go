// Package fakeclock is a jumping virtual clock for kretry's own tests: it
// implements k8s.io/utils/clock's WithDelayedExecution, and every timer it
// is asked for (a wait kretry chose) fires at once, moving virtual time on
// by its duration and recording it. A whole 30-second InternalError window
// thus runs in microseconds, and a test asserts exactly what kretry chose to
// wait. Tests that must hold a wait open (to cancel it, say) use
// k8s.io/utils/clock/testing.FakeClock, which kretry takes just as well.
package fakeclock
