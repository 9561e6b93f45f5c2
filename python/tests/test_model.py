"""A Qwen3-Next causal LM from transformers' own model code and config (random weights, a tiny config: three
linear-attention layers and a full-attention one, sparse MoE), its GDN layers on libgdn (libgdn.use_libgdn;
python/qwen3next_model.py), decoding greedily 128 tokens on CPU. Skipped without transformers.

- the GDN layers' prefill-then-decode outputs and pools equal one long prefill of the same layer inputs, bit for bit
  (transformers' own pipeline on those inputs does not: its chunked prefill is not its recurrent steps);
- against transformers' own model (its torch fallbacks): the tokens agree (a divergence only at a near tie) and the
  teacher-forced logits agree within 1e-4 of their largest;
- speculative rounds (verify with commit 0, commit k) give plain decoding's tokens, leave the pools untouched on
  verify, and leave after each commit the bits of k one-token calls on the round's layer inputs.
"""
import os
import sys

import pytest
import torch

pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next", exc_type=ImportError)
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import qwen3next_model as qm  # noqa: E402

STEPS = 128


@pytest.fixture(scope="module")
def result():
    lines = []
    r = qm.run("tiny", layers=4, steps=STEPS, prompt_len=16, log=lines.append)
    print("\n" + "\n".join(lines))
    return r


def test_prefill_then_decode_equals_one_prefill(result):
    assert len(result["layer_bits"]) == 3
    for layer, (y, s, h, calls, tokens) in result["layer_bits"].items():
        assert calls == STEPS and tokens == 16 + STEPS - 1
        assert y and s and h, "layer %d: y %s, state %s, history %s" % (layer, y, s, h)


def test_transformers_split_differs(result):
    """transformers' own pipeline on the same layer inputs: its chunked prefill then recurrent steps are not its one
    chunked prefill (observed: 1e-7 to 1e-6 relative), where libgdn's are the same bits."""
    for layer, (y, s) in result["hf_split"].items():
        assert 0 < y < 1e-4 and s < 1e-4, "layer %d: y %g, state %g" % (layer, y, s)


def test_against_transformers(result):
    assert result["max_logit_diff"] <= 1e-4 * result["max_logit"], result["max_logit_diff"]
    if result["first_divergence"] < STEPS:  # only where transformers' top two logits are within our difference
        assert result["margin_at_divergence"] <= 10 * result["max_logit_diff"], result["margin_at_divergence"]
    assert len(set(result["tokens"].tolist())) > 8  # the decode is not stuck on one token


def test_speculative_rounds_equal_plain_decoding(result):
    s = result["spec"]
    assert result["spec_tokens_equal"]
    assert s["verify_untouched"] and s["verify_equals_commit"] and s["commit_bits"]
    assert len(s["accepted"]) >= 3  # rounds accepting different counts
    assert result["spec_state_rel"] <= 1e-4


def test_padding_is_refused():
    import libgdn
    cfg = qm.config("tiny", layers=4)
    model, pools, _ = qm.on_libgdn(qm.build(cfg))
    ids = torch.randint(0, cfg.vocab_size, (1, 6))
    mask = torch.ones(1, 6, dtype=torch.long)
    mask[0, :2] = 0
    pools.set_batch(slot=[0], fresh=[1])
    with pytest.raises(ValueError, match="attention_mask"), torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones(1, 6, dtype=torch.long)).logits
    assert torch.isfinite(out).all()
    assert sum(isinstance(m, libgdn.TransformersGatedDeltaNet) for m in model.modules()) == 3


def test_fallbacks_are_transformers_own(result):
    """transformers' model ran its own torch functions: each stage named (transformers 5.25 makes every hub-kernel
    function a kernels `Func` module, which inspect.unwrap does not see through), and torch_fallbacks() puts the
    plain functions in the modeling module's place."""
    import inspect
    from transformers.models.qwen3_next import modeling_qwen3_next as m
    for stage, impl in result["transformers_picked"].items():
        assert impl.startswith("transformers.models.qwen3_next.modeling_qwen3_next.") and not impl.endswith(".?"), \
            "%s: %s" % (stage, impl)
    with qm.torch_fallbacks():
        for name in qm.FALLBACKS:
            if hasattr(m, name):
                assert inspect.isfunction(getattr(m, name)), "%s: %r" % (name, getattr(m, name))


def test_positions_follow_the_committed_tokens():
    """The model's positions start at transformers' Cache.get_seq_length(), which from transformers 5.25 is layer 0's
    count, a linear-attention layer's (its own module advances it): the libgdn layers advance it by the tokens they
    keep, so a prefill, a step, a verify (commit 0) and a commit of 2 of a 3-token window leave 6, 7, 7, 9 (the
    driver crops the full-attention keys to match), and the logits equal transformers' model at those places."""
    cfg = qm.config("tiny", layers=4)
    theirs = qm.build(cfg)
    model, pools, _ = qm.on_libgdn(theirs)
    ids = torch.randint(0, cfg.vocab_size, (9,), generator=torch.Generator().manual_seed(3))
    cache = qm.new_cache(model)
    seen = []
    qm.forward(model, ids[:6], cache, pools, fresh=[1])
    seen.append(int(cache.get_seq_length()))
    qm.forward(model, ids[6:7], cache, pools)
    seen.append(int(cache.get_seq_length()))
    window = torch.tensor([int(ids[7]), int(ids[8]), 5])  # two tokens of ids, then another
    qm.forward(model, window, cache, pools, commit=[0])
    qm.crop(cache, 3)
    seen.append(int(cache.get_seq_length()))
    ours = qm.forward(model, window, cache, pools, commit=[2])
    qm.crop(cache, 1)
    seen.append(int(cache.get_seq_length()))
    assert seen == [6, 7, 7, 9]
    with qm.torch_fallbacks():
        ref = qm.forward(theirs, ids, qm.new_cache(theirs))
    assert (ours[:2] - ref[7:9]).abs().max() <= 1e-4 * ref.abs().max()
