"""The default kube-scheduler: the reference engine and the numba core."""
