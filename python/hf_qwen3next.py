"""Hugging Face transformers' Qwen3-Next GDN layer, for the checks and benchmarks that compare libgdn with it.

Shared by python/check_transformers.py (CPU, the torch fallbacks) and bench/layer_peers.py (the module's forward as
it runs, with whatever implementations it picked). Imports torch and transformers only when called.

- `build_module(Hk, Hv, D, dtype, device)`: a Qwen3NextGatedDeltaNet from a small Qwen3NextConfig, with random
  dt_bias and norm weight (the module's init makes them ones), conv1d and A_log as the module initialises them.
- `torch_fallbacks(m)`: the module's own torch fallbacks, unwrapped from transformers' kernel decorators (`unwrap`).
- `picked(m, mod)`: which implementation the module's forward calls for each stage (fla, causal-conv1d or torch).
- `weights(mod)`: the module's weights as libgdn's f32 arrays (conv_w [C, 4], dt_bias, A_log, gamma).
"""
import inspect


def modeling():
    """(transformers, the qwen3_next modeling module, Qwen3NextConfig)."""
    import transformers
    from transformers import Qwen3NextConfig
    import transformers.models.qwen3_next.modeling_qwen3_next as m
    return transformers, m, Qwen3NextConfig


def build_module(Hk, Hv, D, dtype=None, device="cpu", hidden_size=64):
    """(config, module): a Qwen3NextGatedDeltaNet with Hk key heads, Hv value heads, Dk = Dv = D, eval mode, on
    `device` in `dtype` (default f32). Weights: conv1d nn.Conv1d's init, A_log the module's log(uniform(0.01, 16)),
    dt_bias and the gated norm's weight uniform(0.5, 1.5) (their init is ones). Draws from torch's global RNG."""
    import torch
    _, m, Config = modeling()
    cfg = Config(hidden_size=hidden_size, linear_num_key_heads=Hk, linear_num_value_heads=Hv,
                 linear_key_head_dim=D, linear_value_head_dim=D, linear_conv_kernel_dim=4, num_hidden_layers=1,
                 layer_types=["linear_attention"], rms_norm_eps=1e-6, hidden_act="silu")
    mod = m.Qwen3NextGatedDeltaNet(cfg, 0).eval()
    assert mod.conv_dim == 2 * Hk * D + Hv * D and mod.conv_kernel_size == 4 and mod.conv1d.bias is None
    with torch.no_grad():
        mod.dt_bias.uniform_(0.5, 1.5)
        mod.norm.weight.uniform_(0.5, 1.5)
    mod = mod.to(device=device, dtype=dtype or torch.float32)
    return cfg, mod


def weights(mod):
    """The module's weights as libgdn takes them: f32, contiguous, on the module's device."""
    import torch
    f = lambda t: t.detach().to(torch.float32).contiguous()
    return dict(conv_w=f(mod.conv1d.weight.squeeze(1)), dt_bias=f(mod.dt_bias), A_log=f(mod.A_log),
                gamma=f(mod.norm.weight))


def _key_heads_repeated(fn):
    """fn with q and k [B, T, Hk, D] repeated to v's Hv heads (head h reads key head h // (Hv / Hk)) before the
    call: some transformers versions (5.17) repeat them in the module's forward, not in the fallbacks, which then need
    Hk = Hv; others (5.24) repeat inside, where Hk = Hv passes through."""
    def call(query, key, value, *args, **kwargs):
        r = value.shape[2] // query.shape[2]
        if r > 1:
            query, key = query.repeat_interleave(r, dim=2), key.repeat_interleave(r, dim=2)
        return fn(query, key, value, *args, **kwargs)
    return call


def _func_of(fn):
    """The function a `kernels` Func module calls (what kernels' use_kernel_forward_from_hub makes of a function,
    the `func` its forward closes over), else fn."""
    forward = getattr(type(fn), "forward", None)
    code = getattr(forward, "__code__", None)
    if code is None or "func" not in code.co_freevars:
        return fn
    return forward.__closure__[code.co_freevars.index("func")].cell_contents


def unwrap(fn):
    """A stage function with transformers' hub-kernel decorators taken off: the torch function under them.
    transformers 5.25 (where `kernels` is a dependency) makes each decorated function a kernels Func module, an
    nn.Module whose forward calls the decorated function; under it, and in 5.24, functools.wraps wrappers."""
    return inspect.unwrap(_func_of(fn))


def torch_fallbacks(m):
    """The module's torch fallbacks themselves: {"chunk": ..., "recurrent": ...} and the conv update. Newer
    transformers wrap them in hub-kernel decorators that call fla or causal-conv1d where installed; unwrapped, an
    installed package cannot take their place. Older transformers name the update torch_causal_conv1d_update."""
    fallbacks = {"chunk": _key_heads_repeated(unwrap(m.torch_chunk_gated_delta_rule)),
                 "recurrent": _key_heads_repeated(unwrap(m.torch_recurrent_gated_delta_rule))}
    conv_update = unwrap(getattr(m, "torch_causal_conv1d_update", None) or m.causal_conv1d_update)
    return fallbacks, conv_update


def _impl_of(fn):
    """What a (possibly decorated) stage function runs: the `implementation` its hub-kernel wrapper closed over
    (transformers 5; in 5.25 inside a kernels Func module), else the function itself; as "module.name"."""
    seen = 0
    while fn is not None and seen < 8:
        seen += 1
        fn = _func_of(fn)
        code = getattr(fn, "__code__", None)
        cells = dict(zip(code.co_freevars, fn.__closure__ or ())) if code is not None else {}
        if "implementation" in cells:
            fn = cells["implementation"].cell_contents
            break
        nxt = getattr(fn, "__wrapped__", None)
        if nxt is None:
            break
        fn = nxt
    if fn is None:
        return "none"
    return "%s.%s" % (getattr(fn, "__module__", "?"), getattr(fn, "__qualname__", getattr(fn, "__name__", "?")))


def picked(m, mod):
    """{stage: "module.function"}: the implementations the module's forward calls. transformers 4.x keeps them as
    attributes of the module (self.chunk_gated_delta_rule, ...; None for an absent causal_conv1d_fn), 5.x as
    decorated module-level functions that resolved fla / causal_conv1d at import time."""
    def stage(attr, name):
        if hasattr(mod, attr):
            fn = getattr(mod, attr)
            return "none (torch conv1d)" if fn is None else _impl_of(fn)
        return _impl_of(getattr(m, name, None))
    norm = type(mod.norm)
    return {"chunk": stage("chunk_gated_delta_rule", "torch_chunk_gated_delta_rule"),
            "recurrent": stage("recurrent_gated_delta_rule", "torch_recurrent_gated_delta_rule"),
            "conv_fn": stage("causal_conv1d_fn", "causal_conv1d_fn"),
            "conv_update": stage("causal_conv1d_update", "causal_conv1d_update"),
            "norm": "%s.%s" % (norm.__module__, norm.__qualname__)}
