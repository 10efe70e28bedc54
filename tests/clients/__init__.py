"""Real Kubernetes clients, built from Go modules, for tests, the demo and benchmarks.

One binary (`tests/clients/go`, built and cached by `tests/clients/build.sh`) carries kubectl
(`k8s.io/kubectl` at the apiserver's version) and Flux's apply library (`github.com/fluxcd/pkg/ssa`,
`ResourceManager.ApplyAllStaged` as kustomize-controller sets it up). `Kubectl` and `Flux` run it against a
kubeconfig context; `Kustomizations` writes Flux's real Kustomization objects and the inventory their controller
keeps (`kustomization_crd()`: the CRD from kustomize-controller's module); `kubectl_apply_loop` / `flux_apply_loop` keep a client applying in the background.
Nothing here is part of the shipped collection.
"""
from __future__ import annotations

from .binary import ClientsMissing, clients_binary
from .flux import DEFAULT_KUSTOMIZATION, FLUX_MANAGER, Flux, FluxFailed, FluxResult
from .helm import Helm, HelmFailed, HelmMissing, HelmResult, helm_binary, write_chart
from .kubectl import Kubectl, KubectlFailed, Result
from .kustomization import KUSTOMIZE_CONTROLLER_VERSION, Kustomizations, kustomization_crd
from .loop import ApplyLoop, Outcome, flux_apply_loop, kubectl_apply_loop
from .manifests import write_manifests

__all__ = [
    "ClientsMissing", "clients_binary", "DEFAULT_KUSTOMIZATION", "FLUX_MANAGER", "Flux", "FluxFailed", "FluxResult", "Kubectl",
    "KubectlFailed", "Result", "ApplyLoop", "Outcome", "flux_apply_loop", "kubectl_apply_loop", "write_manifests",
    "Helm", "HelmFailed", "HelmMissing", "HelmResult", "helm_binary", "write_chart",
    "KUSTOMIZE_CONTROLLER_VERSION", "Kustomizations", "kustomization_crd",
]
