"""Integrations of attn_mlir's kernels into other frameworks (each module
imports its framework on use; none is imported by `attn_mlir` itself)."""
