"""Independent float64 reference of the diffusion policy's networks and noise schedules.

Written from the Python sources, not from sparsevit's C++:
  * Diffusion Policy (real-stanford/diffusion_policy) model/diffusion/conditional_unet1d.py,
    conv1d_components.py, positional_embedding.py: ConditionalUnet1D without local_cond.
  * Crossway Diffusion (LostXine/crossway_diffusion) model/diffusion/conditional_unet1d.py
    (ConditionalUnet1DwDecTypeC / TypeD image decoders, generate_positional_embedding) and
    conv2d_components.py.
  * diffusers 0.11.1 (the version Diffusion Policy pins) DDPMScheduler / DDIMScheduler:
    betas_for_alpha_bar, add_noise, step (epsilon prediction, clip_sample, fixed_small,
    DDIM eta = 0, set_alpha_to_one, steps_offset 0).

The networks are functions of a {name: tensor} dict whose names are the PyTorch originals'
state_dict names; `*_parameter_shapes` list those names and shapes for a configuration.
"""
import math

import torch
import torch.nn.functional as F


def mish(x):
    return x * torch.tanh(F.softplus(x))


# ---------------------------------------------------------------- ConditionalUnet1D

def unet_parameter_shapes(input_dim, global_cond_dim, dsed, down_dims, kernel_size, n_groups, cond_predict_scale):
    """Ordered (name, shape) of ConditionalUnet1D's state_dict (no local_cond)."""
    shapes = []
    cond_dim = dsed + global_cond_dim

    def conv_block(prefix, cin, cout, k):
        shapes.extend([(prefix + "block.0.weight", (cout, cin, k)), (prefix + "block.0.bias", (cout,)),
                       (prefix + "block.1.weight", (cout,)), (prefix + "block.1.bias", (cout,))])

    def res_block(prefix, cin, cout):
        conv_block(prefix + "blocks.0.", cin, cout, kernel_size)
        conv_block(prefix + "blocks.1.", cout, cout, kernel_size)
        film = 2 * cout if cond_predict_scale else cout
        shapes.extend([(prefix + "cond_encoder.1.weight", (film, cond_dim)), (prefix + "cond_encoder.1.bias", (film,))])
        if cin != cout:
            shapes.extend([(prefix + "residual_conv.weight", (cout, cin, 1)), (prefix + "residual_conv.bias", (cout,))])

    shapes.extend([("diffusion_step_encoder.1.weight", (4 * dsed, dsed)), ("diffusion_step_encoder.1.bias", (4 * dsed,)),
                   ("diffusion_step_encoder.3.weight", (dsed, 4 * dsed)), ("diffusion_step_encoder.3.bias", (dsed,))])
    all_dims = [input_dim] + list(down_dims)
    in_out = list(zip(all_dims[:-1], all_dims[1:]))
    mid = all_dims[-1]
    res_block("mid_modules.0.", mid, mid)
    res_block("mid_modules.1.", mid, mid)
    for i, (din, dout) in enumerate(in_out):
        res_block(f"down_modules.{i}.0.", din, dout)
        res_block(f"down_modules.{i}.1.", dout, dout)
        if i < len(in_out) - 1:
            shapes.extend([(f"down_modules.{i}.2.conv.weight", (dout, dout, 3)), (f"down_modules.{i}.2.conv.bias", (dout,))])
    for i, (din, dout) in enumerate(reversed(in_out[1:])):
        res_block(f"up_modules.{i}.0.", dout * 2, din)
        res_block(f"up_modules.{i}.1.", din, din)
        # ConvTranspose1d weight: [in, out, k]
        shapes.extend([(f"up_modules.{i}.2.conv.weight", (din, din, 4)), (f"up_modules.{i}.2.conv.bias", (din,))])
    start = down_dims[0]
    conv_block("final_conv.0.", start, start, kernel_size)
    shapes.extend([("final_conv.1.weight", (input_dim, start, 1)), ("final_conv.1.bias", (input_dim,))])
    return shapes


def sinusoidal_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000) / (half - 1)))
    args = t.to(torch.float64)[:, None] * freqs[None, :]
    return torch.cat([args.sin(), args.cos()], dim=-1)


def conv_block1d(w, prefix, x, n_groups):
    k = w[prefix + "block.0.weight"].shape[-1]
    x = F.conv1d(x, w[prefix + "block.0.weight"], w[prefix + "block.0.bias"], padding=k // 2)
    x = F.group_norm(x, n_groups, w[prefix + "block.1.weight"], w[prefix + "block.1.bias"], eps=1e-5)
    return mish(x)


def res_block1d(w, prefix, x, cond, n_groups, cond_predict_scale):
    out = conv_block1d(w, prefix + "blocks.0.", x, n_groups)
    embed = F.linear(mish(cond), w[prefix + "cond_encoder.1.weight"], w[prefix + "cond_encoder.1.bias"])[:, :, None]
    if cond_predict_scale:
        c = out.shape[1]
        embed = embed.reshape(embed.shape[0], 2, c, 1)
        out = embed[:, 0] * out + embed[:, 1]
    else:
        out = out + embed
    out = conv_block1d(w, prefix + "blocks.1.", out, n_groups)
    if prefix + "residual_conv.weight" in w:
        return out + F.conv1d(x, w[prefix + "residual_conv.weight"], w[prefix + "residual_conv.bias"])
    return out + x


def unet_forward(w, sample, timesteps, global_cond, dsed, n_levels, n_groups, cond_predict_scale):
    """sample [B, T, input_dim] -> (prediction [B, T, input_dim], mid features [B, C, T'])."""
    emb = sinusoidal_embedding(timesteps.expand(sample.shape[0]), dsed)
    h = F.linear(emb, w["diffusion_step_encoder.1.weight"], w["diffusion_step_encoder.1.bias"])
    feat = F.linear(mish(h), w["diffusion_step_encoder.3.weight"], w["diffusion_step_encoder.3.bias"])
    if global_cond is not None:
        feat = torch.cat([feat, global_cond], dim=-1)
    x = sample.permute(0, 2, 1)
    skips = []
    for i in range(n_levels):
        x = res_block1d(w, f"down_modules.{i}.0.", x, feat, n_groups, cond_predict_scale)
        x = res_block1d(w, f"down_modules.{i}.1.", x, feat, n_groups, cond_predict_scale)
        skips.append(x)
        if i < n_levels - 1:
            x = F.conv1d(x, w[f"down_modules.{i}.2.conv.weight"], w[f"down_modules.{i}.2.conv.bias"], stride=2, padding=1)
    for i in range(2):
        x = res_block1d(w, f"mid_modules.{i}.", x, feat, n_groups, cond_predict_scale)
    mid = x.clone()
    for i in range(n_levels - 1):
        x = torch.cat([x, skips.pop()], dim=1)
        x = res_block1d(w, f"up_modules.{i}.0.", x, feat, n_groups, cond_predict_scale)
        x = res_block1d(w, f"up_modules.{i}.1.", x, feat, n_groups, cond_predict_scale)
        x = F.conv_transpose1d(x, w[f"up_modules.{i}.2.conv.weight"], w[f"up_modules.{i}.2.conv.bias"], stride=2, padding=1)
    x = conv_block1d(w, "final_conv.0.", x, 8)  # the original's final Conv1dBlock keeps n_groups=8
    x = F.conv1d(x, w["final_conv.1.weight"], w["final_conv.1.bias"])
    return x.permute(0, 2, 1), mid


# ---------------------------------------------------------------- Crossway decoder

def decoder_parameter_shapes(proj_in, decode_dims, pe_dim, image_channels, kernel_size):
    """(name, shape) of the image decoder; names: `proj.0` (proj.image.0 / mid_proj.0 in the
    original), `blocks.*` (decs.image.*), `final_conv.*` (decs.image_final.*)."""
    shapes = [("proj.0.weight", (decode_dims[-1], proj_in)), ("proj.0.bias", (decode_dims[-1],))]

    def conv_block(prefix, cin, cout, k):
        shapes.extend([(prefix + "block.0.weight", (cout, cin, k, k)), (prefix + "block.0.bias", (cout,)),
                       (prefix + "block.1.weight", (cout,)), (prefix + "block.1.bias", (cout,))])

    def res_block(prefix, cin, cout):
        conv_block(prefix + "blocks.0.", cin, cout, kernel_size)
        conv_block(prefix + "blocks.1.", cout, cout, kernel_size)
        if cin != cout:
            shapes.extend([(prefix + "residual_conv.weight", (cout, cin, 1, 1)), (prefix + "residual_conv.bias", (cout,))])

    in_out = list(zip(decode_dims[:-1], decode_dims[1:]))
    for i, (din, dout) in enumerate(reversed(in_out)):
        res_block(f"blocks.{i}.0.", dout + pe_dim, din)
        res_block(f"blocks.{i}.1.", din, din)
        shapes.extend([(f"blocks.{i}.2.conv.weight", (din, din, 4, 4)), (f"blocks.{i}.2.conv.bias", (din,))])
    start = decode_dims[0]
    conv_block("final_conv.0.", start, start, kernel_size)
    shapes.extend([("final_conv.1.weight", (image_channels, start, 1, 1)), ("final_conv.1.bias", (image_channels,))])
    return shapes


def positional_grid(b, dim, h, w):
    """generate_positional_embedding of the original, in float64."""
    hidx = torch.linspace(-1, 1, steps=h, dtype=torch.float64)
    widx = torch.linspace(-1, 1, steps=w, dtype=torch.float64)
    grids = []
    for i in range(dim // 4):
        grids.append(torch.stack(torch.meshgrid((2 ** i) * math.pi * hidx, (2 ** i) * math.pi * widx, indexing="ij"), 0))
    phases = torch.cat(grids, 0)
    pe = torch.cat([torch.sin(phases), torch.cos(phases)], 0)
    return pe.unsqueeze(0).repeat(b, 1, 1, 1)


def conv_block2d(w, prefix, x, n_groups):
    k = w[prefix + "block.0.weight"].shape[-1]
    x = F.conv2d(x, w[prefix + "block.0.weight"], w[prefix + "block.0.bias"], padding=k // 2)
    x = F.group_norm(x, n_groups, w[prefix + "block.1.weight"], w[prefix + "block.1.bias"], eps=1e-5)
    return mish(x)


def res_block2d(w, prefix, x, n_groups):
    out = conv_block2d(w, prefix + "blocks.0.", x, n_groups)
    out = conv_block2d(w, prefix + "blocks.1.", out, n_groups)
    if prefix + "residual_conv.weight" in w:
        return out + F.conv2d(x, w[prefix + "residual_conv.weight"], w[prefix + "residual_conv.bias"])
    return out + x


def decoder_forward(w, features, kind, n_obs_steps, decode_dims, pe_dim, resolution, image_hw, n_groups):
    """kind 'mid' (type C: features [B, C, T'] from the U-Net) or 'obs' (type D: [B, G])."""
    n_up = len(decode_dims) - 1
    h_res, w_res = image_hw[0] // (2 ** n_up), image_hw[1] // (2 ** n_up)
    hs, ws = math.ceil(h_res / resolution), math.ceil(w_res / resolution)
    if kind == "mid":
        # einops 'b (t c) h -> (b t) c h', then the T' positions as a resolution x resolution grid
        b, c, t = features.shape
        mid_ld = features.reshape(b, n_obs_steps, c // n_obs_steps, t).reshape(b * n_obs_steps, c // n_obs_steps, t)
        mid_rgb = mid_ld.reshape(mid_ld.shape[0], mid_ld.shape[1], resolution, resolution)
        x = mid_rgb.repeat(1, 1, hs, ws)[:, :, :h_res, :w_res]
        bb = x.shape[0]
        x = x.permute(0, 2, 3, 1).reshape(-1, x.shape[1])  # '(b h w) c'
        x = mish(F.linear(x, w["proj.0.weight"], w["proj.0.bias"]))
        x = x.reshape(bb, h_res, w_res, -1).permute(0, 3, 1, 2)
    else:
        b, g = features.shape
        mid_id = features.reshape(b * n_obs_steps, g // n_obs_steps)
        mid_id = F.relu(F.linear(mid_id, w["proj.0.weight"], w["proj.0.bias"]))[:, :, None, None]
        mid_rgb = mid_id.repeat(1, 1, resolution, resolution)
        x = mid_rgb.repeat(1, 1, hs, ws)[:, :, :h_res, :w_res]
    for i in range(n_up):
        x = torch.cat([x, positional_grid(x.shape[0], pe_dim, x.shape[2], x.shape[3])], dim=1)
        x = res_block2d(w, f"blocks.{i}.0.", x, n_groups)
        x = res_block2d(w, f"blocks.{i}.1.", x, n_groups)
        x = F.conv_transpose2d(x, w[f"blocks.{i}.2.conv.weight"], w[f"blocks.{i}.2.conv.bias"], stride=2, padding=1)
    x = conv_block2d(w, "final_conv.0.", x, 8)
    return F.conv2d(x, w["final_conv.1.weight"], w["final_conv.1.bias"])


# ---------------------------------------------------------------- diffusers 0.11.1 schedules

def cosine_betas(n, max_beta=0.999):
    def alpha_bar(t):
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2
    return torch.tensor([min(1 - alpha_bar((i + 1) / n) / alpha_bar(i / n), max_beta) for i in range(n)],
                        dtype=torch.float32)


class Schedule:
    """The float32 tables of diffusers; step arithmetic in float64 from those values."""

    def __init__(self, n=100):
        self.n = n
        self.betas = cosine_betas(n)
        self.alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(self.alphas, dim=0)
        self.b = self.betas.double()
        self.a = self.alphas.double()
        self.abar = self.alphas_cumprod.double()

    def add_noise(self, x0, noise, t):
        ab = self.abar[t].reshape(-1, *([1] * (x0.dim() - 1)))
        return ab.sqrt() * x0 + (1 - ab).sqrt() * noise

    def x0(self, eps, t, x):
        ab = self.abar[t]
        return ((x - (1 - ab).sqrt() * eps) / ab.sqrt()).clamp(-1, 1)

    def ddpm_step(self, eps, t, x, noise):
        ab_t = self.abar[t]
        ab_prev = self.abar[t - 1] if t > 0 else torch.tensor(1.0, dtype=torch.float64)
        x0 = self.x0(eps, t, x)
        mean = (ab_prev.sqrt() * self.b[t] / (1 - ab_t)) * x0 + (self.a[t].sqrt() * (1 - ab_prev) / (1 - ab_t)) * x
        if t > 0:
            var = torch.clamp((1 - ab_prev) / (1 - ab_t) * self.b[t], min=1e-20)
            mean = mean + var.sqrt() * noise
        return mean

    def ddim_timesteps(self, n_inference):
        ratio = self.n // n_inference
        return [int(v) for v in (torch.arange(0, n_inference) * ratio).flip(0)]

    def ddim_step(self, eps, t, x, n_inference):
        prev = t - self.n // n_inference
        ab_prev = self.abar[prev] if prev >= 0 else torch.tensor(1.0, dtype=torch.float64)
        x0 = self.x0(eps, t, x)
        return ab_prev.sqrt() * x0 + (1 - ab_prev).sqrt() * eps
