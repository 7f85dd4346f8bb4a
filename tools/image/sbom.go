package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// spdxDocument is the part of an SPDX 2.3 JSON document the SBOM uses.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string       `json:"name"`
	SPDXID           string       `json:"SPDXID"`
	VersionInfo      string       `json:"versionInfo"`
	DownloadLocation string       `json:"downloadLocation"`
	FilesAnalyzed    bool         `json:"filesAnalyzed"`
	LicenseConcluded string       `json:"licenseConcluded"`
	LicenseDeclared  string       `json:"licenseDeclared"`
	CopyrightText    string       `json:"copyrightText"`
	ExternalRefs     []spdxExtRef `json:"externalRefs,omitempty"`
}

type spdxExtRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// sbom is an SPDX 2.3 JSON document of what the binaries of one build are made of, from their
// build information: the main module, every module linked in (its replacement when replaced)
// and the Go standard library, one package each, the main one DEPENDS_ON every other. Every
// platform's binary must list the same modules. Its namespace names the image index's digest,
// so that the document is the same for the same image and another for another.
func sbom(infos []*debug.BuildInfo, spec imageSpec, indexDigest string) ([]byte, int, error) {
	modules := func(info *debug.BuildInfo) []string {
		var out []string
		for _, dep := range info.Deps {
			out = append(out, moduleOf(dep).Path+"@"+moduleOf(dep).Version)
		}
		sort.Strings(out)
		return out
	}
	for _, info := range infos[1:] {
		if a, b := strings.Join(modules(infos[0]), " "), strings.Join(modules(info), " "); a != b {
			return nil, 0, fmt.Errorf("the platforms' binaries link different modules:\n%s\n%s", a, b)
		}
	}
	info := infos[0]
	pkg := func(id, name, version string, purl bool) spdxPackage {
		p := spdxPackage{Name: name, SPDXID: id, VersionInfo: version, DownloadLocation: "NOASSERTION",
			LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION"}
		if purl {
			p.ExternalRefs = []spdxExtRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
				ReferenceLocator: "pkg:golang/" + name + "@" + version}}
		}
		return p
	}
	mainID := "SPDXRef-Package-main"
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "kretry-proxy " + spec.version,
		DocumentNamespace: "https://github.com/kretry/kretry/spdx/kretry-proxy/" + strings.TrimPrefix(indexDigest, "sha256:"),
		CreationInfo: spdxCreationInfo{Created: spec.created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: kretry tools/image (from the binary's Go build information)"}},
	}
	doc.Packages = append(doc.Packages, pkg(mainID, info.Main.Path, spec.version, true))
	doc.Packages = append(doc.Packages, pkg("SPDXRef-Package-stdlib", "stdlib", info.GoVersion, true))
	doc.Relationships = append(doc.Relationships,
		spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", mainID},
		spdxRelationship{mainID, "DEPENDS_ON", "SPDXRef-Package-stdlib"})
	for i, dep := range info.Deps {
		m := moduleOf(dep)
		id := fmt.Sprintf("SPDXRef-Package-%d", i+1)
		doc.Packages = append(doc.Packages, pkg(id, m.Path, m.Version, m.Version != "(devel)"))
		doc.Relationships = append(doc.Relationships, spdxRelationship{mainID, "DEPENDS_ON", id})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, 0, err
	}
	return append(out, '\n'), len(doc.Packages), nil
}

// moduleOf is the module whose code is in the binary: dep's replacement when it has one (a
// directory replacement, a workspace module, has no version: "(devel)").
func moduleOf(dep *debug.Module) debug.Module {
	m := *dep
	if dep.Replace != nil {
		m = *dep.Replace
		if strings.HasPrefix(m.Path, ".") || strings.HasPrefix(m.Path, "/") {
			m.Path = dep.Path
		}
	}
	if m.Version == "" {
		m.Version = "(devel)"
	}
	return m
}
