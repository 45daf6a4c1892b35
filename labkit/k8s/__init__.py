"""Kubernetes side: manifests from a Scenario, and a kind + Volcano + KWOK cluster to run them on."""
