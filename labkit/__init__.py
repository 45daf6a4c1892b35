"""labkit: scheduler simulator and lab kit for multi-tenant AI training."""
