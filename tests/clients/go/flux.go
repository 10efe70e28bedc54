package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fluxGroup is the API group of Flux's Kustomization: kustomize-controller names its owner labels and its
// per-object annotations (ssa, force, reconcile) after it.
const fluxGroup = "kustomize.toolkit.fluxcd.io"

type fluxArgs struct {
	kubeconfig, context, file, fieldManager, ownerName, ownerNamespace string
	qps                                                                float64
	burst, concurrency                                                 int
	timeout                                                            time.Duration
}

// fluxResult is what flux-apply prints: one entry per object, in the order Flux applied them.
type fluxResult struct {
	FieldManager string      `json:"field_manager"`
	Objects      []fluxEntry `json:"objects"`
	Applied      int         `json:"applied"`
	Changed      int         `json:"changed"`
	Error        string      `json:"error,omitempty"`
	// Inventory is what kustomize-controller writes to the Kustomization's status.inventory.entries after
	// this apply (internal/inventory/inventory.go, AddChangeSet): unchanged objects included.
	Inventory []inventoryRef `json:"inventory"`
}

// inventoryRef is kustomize-controller's ResourceRef: the object's ObjMetadata string and its applied version.
type inventoryRef struct {
	ID      string `json:"id"`
	Version string `json:"v"`
}

type fluxEntry struct {
	Subject   string `json:"subject"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Action    string `json:"action"`
	Changed   bool   `json:"changed"`
}

func parseFluxArgs(argv []string) (fluxArgs, error) {
	var a fluxArgs
	fs := flag.NewFlagSet("flux-apply", flag.ContinueOnError)
	fs.StringVar(&a.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	fs.StringVar(&a.context, "context", "", "kubeconfig context (default: its current context)")
	fs.StringVar(&a.file, "file", "", "multi-document YAML (or JSON) manifests to apply")
	fs.StringVar(&a.fieldManager, "field-manager", "kustomize-controller", "field manager (kustomize-controller's controller name)")
	fs.StringVar(&a.ownerName, "owner-name", "crdops-test", "name of the Kustomization the objects are labelled with")
	fs.StringVar(&a.ownerNamespace, "owner-namespace", "flux-system", "namespace of that Kustomization")
	// kustomize-controller's defaults for its --kube-api-qps, --kube-api-burst and --concurrent-ssa flags
	fs.Float64Var(&a.qps, "qps", 50, "client QPS")
	fs.IntVar(&a.burst, "burst", 300, "client burst")
	fs.IntVar(&a.concurrency, "concurrency", 4, "objects checked for drift at once")
	fs.DurationVar(&a.timeout, "timeout", 60*time.Second, "whole apply")
	if err := fs.Parse(argv); err != nil {
		return a, err
	}
	if a.file == "" || a.kubeconfig == "" {
		return a, fmt.Errorf("flux-apply needs --file and --kubeconfig (or KUBECONFIG)")
	}
	return a, nil
}

func runFluxApply(argv []string) int {
	a, err := parseFluxArgs(argv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	result := fluxResult{FieldManager: a.fieldManager, Objects: []fluxEntry{}, Inventory: []inventoryRef{}}
	changeSet, err := fluxApply(a)
	if changeSet != nil {
		for _, e := range changeSet.Entries {
			changed := e.Action == ssa.CreatedAction || e.Action == ssa.ConfiguredAction
			result.Objects = append(result.Objects, fluxEntry{
				Subject: e.Subject, Version: e.GroupVersion, Kind: e.ObjMetadata.GroupKind.Kind,
				Namespace: e.ObjMetadata.Namespace, Name: e.ObjMetadata.Name, Action: string(e.Action), Changed: changed,
			})
			result.Inventory = append(result.Inventory, inventoryRef{ID: e.ObjMetadata.String(), Version: e.GroupVersion})
			result.Applied++
			if changed {
				result.Changed++
			}
		}
	}
	code := 0
	if err != nil {
		result.Error = err.Error()
		fmt.Fprintln(os.Stderr, "flux-apply:", err)
		code = 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(result)
	return code
}

// fluxApply applies the manifests the way kustomize-controller's reconcile does: normalised objects with
// its owner labels, one ResourceManager.ApplyAllStaged with its apply options and managedFields clean-up.
func fluxApply(a fluxArgs) (*ssa.ChangeSet, error) {
	raw, err := os.ReadFile(a.file)
	if err != nil {
		return nil, err
	}
	objects, err := ssautils.ReadObjects(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", a.file, err)
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: a.kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: a.context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(a.qps), a.burst
	kubeClient, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	poller := polling.NewStatusPoller(kubeClient, kubeClient.RESTMapper(), polling.Options{})
	manager := ssa.NewResourceManager(kubeClient, poller, ssa.Owner{Field: a.fieldManager, Group: fluxGroup})
	manager.SetOwnerLabels(objects, a.ownerName, a.ownerNamespace)
	manager.SetConcurrency(a.concurrency)
	if err := normalize.UnstructuredList(objects); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	return manager.ApplyAllStaged(ctx, objects, kustomizeControllerOptions(a.fieldManager))
}

// kustomizeControllerOptions are the apply options kustomize-controller passes for a Kustomization without
// spec.force: its selectors, and the clean-up that merges the entries of kubectl, of `before-first-apply`
// and of its own pre-SSA updates into its Apply entry before it applies.
func kustomizeControllerOptions(controllerName string) ssa.ApplyOptions {
	opts := ssa.DefaultApplyOptions()
	opts.ExclusionSelector = map[string]string{fluxGroup + "/reconcile": "disabled", fluxGroup + "/ssa": "Ignore"}
	opts.IfNotPresentSelector = map[string]string{fluxGroup + "/ssa": "IfNotPresent"}
	opts.ForceSelector = map[string]string{fluxGroup + "/force": "enabled"}
	opts.Cleanup = ssa.ApplyCleanupOptions{
		Annotations: []string{corev1.LastAppliedConfigAnnotation, fluxGroup + "/checksum", "fluxcd.io/sync-checksum"},
		Labels:      []string{"fluxcd.io/sync-gc-mark"},
		FieldManagers: []ssa.FieldManager{
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply},
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: controllerName, OperationType: metav1.ManagedFieldsOperationUpdate},
		},
		Exclusions: map[string]string{fluxGroup + "/ssa": "Merge"},
	}
	return opts
}
