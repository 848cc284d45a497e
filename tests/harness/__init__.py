"""Test harnesses that start real components (kube-apiserver, ...) for the integration tiers."""
