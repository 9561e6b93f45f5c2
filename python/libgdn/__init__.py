"""libgdn: the Gated DeltaNet recurrence and layer step, the same bits on every kernel, CPU and CUDA.

    delta(q, k, v, gate, beta, ...)        gdn_delta: the recurrence, dense or varlen (cu_seqlens) over state pools
    layer(qkv, z, alpha, beta, ...)        gdn_layer: the layer step after the input projections, over state and
                                           conv-history pools (slots, commit, fresh, checkpoints)
    fused_recurrent_gated_delta_rule, chunk_gated_delta_rule
                                           flash-linear-attention's signatures (and vLLM's ssm_state_indices)
    GatedDeltaNetLayer, GatedDeltaNetCache a torch module in place of transformers' Qwen3NextGatedDeltaNet, its
                                           states in libgdn's pools
    use_libgdn(model)                      a transformers Qwen3-Next model's GDN layers on libgdn, in place
    distributed                            tensor parallel (heads sharded) and context parallel prefill over
                                           torch.distributed (docs/DISTRIBUTED.md)

numpy arrays (host) and torch tensors (CPU, or CUDA on torch's current stream) are read and written in place, no
copy. With torch installed the calls on tensors are the custom ops torch.ops.libgdn.delta and .layer (torch.compile,
CUDA graphs). capi is the C API through ctypes, for raw pointers. python/README.md has the details.
"""
import importlib.util

from . import capi

__all__ = ["capi", "delta", "layer", "kernels", "kernel_contract", "layer_kernels", "cuda_devices", "cpu_release"]
if importlib.util.find_spec("torch") is None:
    from .calls import delta, layer
else:  # the same functions, torch tensors through the custom ops
    from .torch_ops import delta, layer
    from .fla import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
    from .qwen3_next import GatedDeltaNetCache, GatedDeltaNetLayer, TransformersGatedDeltaNet, use_libgdn
    __all__ += ["fused_recurrent_gated_delta_rule", "chunk_gated_delta_rule", "GatedDeltaNetLayer",
                "GatedDeltaNetCache", "TransformersGatedDeltaNet", "use_libgdn"]
    import torch.distributed
    if torch.distributed.is_available():  # some torch builds have none
        from . import distributed
        __all__ += ["distributed"]


def kernels():
    """gdn_delta's kernels in routing order: (name, 'cpu' or 'cuda', [named variants])."""
    return [(n, "cuda" if b == capi.BACKEND_CUDA else "cpu", v) for n, b, v in capi.kernels(capi.lib())]


def kernel_contract(name):
    """The arithmetic kernel `name` keeps: "exact" (the contract's bits, equal to ref) or "chunked" (the chunked
    contract: deterministic and batch-invariant, within the float64 oracle's tolerance; docs/CONTRACT.md)."""
    lib = capi.lib()
    for i in range(lib.gdn_kernel_count()):
        if lib.gdn_kernel_name(i).decode() == name:
            return "chunked" if lib.gdn_kernel_contract(i) == 1 else "exact"
    raise ValueError("no kernel %r (libgdn.kernels() lists them)" % name)


def layer_kernels():
    """gdn_layer's kernels in routing order."""
    return capi.layer_kernels(capi.lib())


def cuda_devices():
    """The CUDA devices this build of libgdn can use (0 without a CUDA build or without a device)."""
    return capi.lib().gdn_device_count(capi.BACKEND_CUDA)


def cpu_release():
    """Frees the workspaces libgdn's CPU kernels keep between calls (up to four buffers; the largest a layer call's,
    8 T (Hk Dk + Hv Dv + Hv) bytes). The next CPU call allocates afresh."""
    capi.lib().gdn_cpu_release()
