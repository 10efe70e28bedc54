// Command crdops-clients carries two real Kubernetes clients, compiled from their own Go modules, for the
// crdops.migration tests, demo and benchmarks. One binary, so the k8s.io packages are compiled once.
//
//	crdops-clients kubectl <args>      kubectl itself (k8s.io/kubectl, NewDefaultKubectlCommand)
//	crdops-clients flux-apply ...      Flux's server-side apply (github.com/fluxcd/pkg/ssa), see flux.go
//	crdops-clients version             the client versions, as JSON
//
// Called through a link named "kubectl", it is kubectl.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

const usage = `usage:
  crdops-clients kubectl <kubectl arguments>
  crdops-clients flux-apply --kubeconfig FILE [--context NAME] --file MANIFESTS [--field-manager kustomize-controller]
  crdops-clients version`

func main() {
	if filepath.Base(os.Args[0]) == "kubectl" {
		runKubectl(os.Args[1:])
		return
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "kubectl":
		runKubectl(os.Args[2:])
	case "flux-apply":
		os.Exit(runFluxApply(os.Args[2:]))
	case "version":
		printVersions()
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n%s\n", os.Args[1], usage)
		os.Exit(2)
	}
}

// runKubectl runs kubectl as its own main does; kubectl reads os.Args (plugin lookup), so it sees its
// arguments there as if it had been started as "kubectl".
func runKubectl(args []string) {
	os.Args = append([]string{"kubectl"}, args...)
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		cmdutil.CheckErr(err)
	}
}

// printVersions names the module version of each client linked in, read from the binary's build info.
func printVersions() {
	out := map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			switch dep.Path {
			case "github.com/fluxcd/pkg/ssa", "k8s.io/kubectl", "k8s.io/client-go", "sigs.k8s.io/controller-runtime":
				out[dep.Path] = dep.Version
			}
		}
		out["go"] = info.GoVersion
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}
