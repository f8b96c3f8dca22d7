#!/usr/bin/python3
"""Regenerates tests/golden/diffusion_policy_golden.inc.

Float64 outputs of conditional_unet1d_reference.py (an independent reference of Diffusion
Policy's ConditionalUnet1D, Crossway Diffusion's image decoders and diffusers 0.11.1's
DDPM / DDIM schedules) for fixed, float32-representable weights and inputs:

  unet_film     input_dim 2, global_cond 6, step embed 8, down_dims [8, 16], kernel 5,
                n_groups 4, FiLM scale + bias; sample [2, 8, 2], timesteps [3, 71]
  unet_bias     input_dim 2, no global_cond, step embed 8, down_dims [8, 8, 8], kernel 3,
                n_groups 2, FiLM bias only (equal channels: identity residuals); sample [2, 8, 2],
                timesteps [0, 99]
  decoder_mid   type C decoder on unet_film's mid features [2, 16, 4]: n_obs_steps 2,
                decode_dims [8, 16], pe 8, resolution 2, 8 x 8 RGB, kernel 3, n_groups 4
  decoder_obs   type D decoder on unet_film's global_cond [2, 6] (n_obs_steps 2, 3 per step),
                same decoder shape and the same `blocks` / `final_conv` weights, its own `proj`
  schedules     betas / alphas_cumprod (100 steps, squaredcos_cap_v2); add_noise; DDPM steps at
                t = 37 and t = 0 with given noise and at t = 37 with torch.randn from a
                Generator seeded 1234; DDIM (10 steps) at t = 90 and t = 0.

Run with Debian's Python (python3-torch): /usr/bin/python3 tests/golden/make_diffusion_policy_golden.py
"""
import os
import platform

import numpy as np
import torch

import conditional_unet1d_reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "diffusion_policy_golden.inc")


def make_weights(shapes, seed):
    """Deterministic weights, float32 values held in float64: norm scales near 1, biases
    small, matrices ~ 1/sqrt(fan_in) so activations stay O(1) through the network."""
    g = torch.Generator().manual_seed(seed)
    w = {}
    for name, shape in shapes:
        r = torch.randn(shape, generator=g, dtype=torch.float64)
        if len(shape) == 1:
            is_norm_scale = name.endswith(".weight")
            v = (1.0 + 0.2 * r) if is_norm_scale else 0.2 * r
        else:
            fan_in = int(np.prod(shape[1:]))
            if "conv.weight" in name and (name.startswith("up_modules") or ".2.conv" in name):
                fan_in = shape[0] * int(np.prod(shape[2:])) // 2  # transposed convs: [in, out, k...]
            v = r / np.sqrt(fan_in)
        # 3 significant digits keep the fixture small; the float32 value is what both sides use.
        w[name] = torch.tensor([float(f"{x:.3g}") for x in v.reshape(-1).tolist()]).reshape(shape).float().double()
    return w


def fmt(values):
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    return ", ".join(repr(float(v)) for v in flat)


def fmt32(values):
    """Shortest text that parses back to each float32 value (double literals narrow exactly
    to the float they came from); '0.x' written '.x' to keep the fixture small."""
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    out = []
    for v in flat:
        text = np.format_float_positional(v, unique=True, trim="-")
        if len(text) > 12:
            text = np.format_float_scientific(v, unique=True, trim="-")
        text = text.replace("-0.", "-.") if text.startswith("-0.") else (text[1:] if text.startswith("0.") else text)
        assert np.float32(float(text)) == v, (text, v)
        out.append(text)
    return ",".join(out)


class Writer:
    def __init__(self):
        self.lines = []

    def floats(self, name, tensor, comment):
        self.lines.append(f"// {comment} {list(tensor.shape)}")
        self.lines.append(f"inline const float {name}[] = {{{fmt32(tensor.numpy())}}};")

    def doubles(self, name, tensor, comment):
        self.lines.append(f"// {comment} {list(tensor.shape)}")
        self.lines.append(f"inline const double {name}[] = {{{fmt(tensor.numpy())}}};")

    def weights(self, prefix, shapes, w):
        entries = []
        for i, (name, shape) in enumerate(shapes):
            arr = f"{prefix}{i}"
            self.lines.append(f"inline const float {arr}[] = {{{fmt32(w[name].numpy())}}};  // {name}")
            entries.append(f'    {{"{name}", {{{", ".join(str(s) for s in shape)}}}, {arr}}},')
        self.lines.append(f"inline const std::vector<PolicyGoldenTensor> {prefix}s = {{")
        self.lines.extend(entries)
        self.lines.append("};")


def main():
    out = Writer()
    # --- unet_film
    film_shapes = ref.unet_parameter_shapes(2, 6, 8, [8, 16], 5, 4, True)
    film_w = make_weights(film_shapes, 1)
    g = torch.Generator().manual_seed(2)
    sample = torch.randn(2, 8, 2, generator=g, dtype=torch.float64).float().double()
    global_cond = torch.randn(2, 6, generator=g, dtype=torch.float64).float().double()
    film_t = torch.tensor([3, 71])
    film_pred, film_mid = ref.unet_forward(film_w, sample, film_t, global_cond, 8, 2, 4, True)
    # The wiring shows: dropping FiLM's scale or the skip moves the output.
    assert film_pred.abs().mean() > 0.1 and film_mid.abs().mean() > 0.1
    out.weights("kUnetFilmWeight", film_shapes, film_w)
    out.floats("kUnetSample", sample, "sample [B, T, input_dim] of both U-Nets")
    out.floats("kUnetFilmGlobalCond", global_cond, "unet_film global_cond")
    out.doubles("kUnetFilmPrediction", film_pred, "unet_film prediction, timesteps {3, 71}")
    out.doubles("kUnetFilmMid", film_mid, "unet_film features after the mid modules")

    # --- unet_bias
    bias_shapes = ref.unet_parameter_shapes(2, 0, 8, [8, 8, 8], 3, 2, False)
    bias_w = make_weights(bias_shapes, 3)
    bias_pred, bias_mid = ref.unet_forward(bias_w, sample, torch.tensor([0, 99]), None, 8, 3, 2, False)
    out.weights("kUnetBiasWeight", bias_shapes, bias_w)
    out.doubles("kUnetBiasPrediction", bias_pred, "unet_bias prediction, timesteps {0, 99}")
    out.doubles("kUnetBiasMid", bias_mid, "unet_bias features after the mid modules")

    # --- decoders
    dec_args = dict(n_obs_steps=2, decode_dims=[8, 16], pe_dim=8, resolution=2, image_hw=(8, 8), n_groups=4)
    mid_in = film_mid.float().double()
    mid_shapes = ref.decoder_parameter_shapes(8, [8, 16], 8, 3, 3)
    mid_w = make_weights(mid_shapes, 4)
    mid_rec = ref.decoder_forward(mid_w, mid_in, "mid", **dec_args)
    obs_shapes = ref.decoder_parameter_shapes(3, [8, 16], 8, 3, 3)[:2]  # proj only
    obs_w = dict(mid_w)
    obs_w.update(make_weights(obs_shapes, 5))
    obs_rec = ref.decoder_forward(obs_w, global_cond, "obs", **dec_args)
    out.weights("kDecoderMidWeight", mid_shapes, mid_w)
    out.floats("kDecoderMidInput", mid_in, "decoder_mid input (unet_film's mid, as float32)")
    out.doubles("kDecoderMidReconstruction", mid_rec, "decoder_mid reconstruction")
    out.weights("kDecoderObsProjWeight", obs_shapes, obs_w)
    out.doubles("kDecoderObsReconstruction", obs_rec, "decoder_obs reconstruction of kUnetFilmGlobalCond")

    # --- schedules
    s = ref.Schedule(100)
    g = torch.Generator().manual_seed(6)
    x0 = torch.randn(2, 8, 2, generator=g).double()
    noise = torch.randn(2, 8, 2, generator=g).double()
    eps = torch.randn(2, 8, 2, generator=g).double()
    xt = (2.0 * torch.randn(2, 8, 2, generator=g)).double()  # some of x0's estimate lands outside [-1, 1]
    step_noise = torch.randn(2, 8, 2, generator=g).double()
    noisy = s.add_noise(x0, noise, torch.tensor([3, 71]))
    ddpm37 = s.ddpm_step(eps, 37, xt, step_noise)
    ddpm0 = s.ddpm_step(eps, 0, xt, None)
    seeded_noise = torch.randn((2, 8, 2), generator=torch.Generator().manual_seed(1234), dtype=torch.float32).double()
    ddpm37_seeded = s.ddpm_step(eps, 37, xt, seeded_noise)
    ddim90 = s.ddim_step(eps, 90, xt, 10)
    ddim0 = s.ddim_step(eps, 0, xt, 10)
    assert s.ddim_timesteps(10) == [90, 80, 70, 60, 50, 40, 30, 20, 10, 0]
    x0_est = (xt - (1 - s.abar[37]).sqrt() * eps) / s.abar[37].sqrt()
    assert (x0_est.abs() > 1).any() and (x0_est.abs() < 1).any()  # the clip matters
    out.doubles("kBetas", s.betas.double(), "betas (float32 values)")
    out.doubles("kAlphasCumprod", s.alphas_cumprod.double(), "alphas_cumprod (float32 cumprod)")
    for name, t, c in [("kScheduleX0", x0, "x0"), ("kScheduleNoise", noise, "noise"),
                       ("kScheduleEpsilon", eps, "model output (epsilon)"), ("kScheduleSample", xt, "sample x_t"),
                       ("kScheduleStepNoise", step_noise, "DDPM step noise")]:
        out.floats(name, t.float(), c)
    out.doubles("kAddNoise", noisy, "add_noise(x0, noise, {3, 71})")
    out.doubles("kDdpmStep37", ddpm37, "DDPM step t = 37 with kScheduleStepNoise")
    out.doubles("kDdpmStep0", ddpm0, "DDPM step t = 0 (no noise)")
    out.doubles("kDdpmStep37Seeded", ddpm37_seeded, "DDPM step t = 37, noise torch.randn from Generator seed 1234")
    out.doubles("kDdimStep90", ddim90, "DDIM (10 steps) step t = 90")
    out.doubles("kDdimStep0", ddim0, "DDIM (10 steps) step t = 0")

    header = [
        f"// Generated by tests/golden/make_diffusion_policy_golden.py (Python {platform.python_version()}, "
        f"PyTorch {torch.__version__}); do not edit.",
        "// Regenerate: /usr/bin/python3 tests/golden/make_diffusion_policy_golden.py",
        "// Float64 outputs of tests/golden/conditional_unet1d_reference.py (Diffusion Policy's",
        "// ConditionalUnet1D, Crossway Diffusion's image decoders, diffusers 0.11.1's DDPM / DDIM) for",
        "// fixed weights by parameter name (float32 values) and inputs; the script states the cases.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "#include <vector>",
        "",
        "namespace sparsevit::golden::diffusion_policy {",
        "",
        "// A named float32 tensor (C order).",
        "struct PolicyGoldenTensor {",
        "  const char* name;",
        "  std::vector<int64_t> shape;",
        "  const float* values;",
        "};",
        "",
    ]
    with open(OUT, "w") as f:
        f.write("\n".join(header + out.lines + ["", "}  // namespace sparsevit::golden::diffusion_policy", ""]))
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
