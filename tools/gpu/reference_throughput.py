#!/usr/bin/env python3
"""PyTorch eager reference for bench/train_throughput's train_step_bench (docs/gpu.md).

The same YOLOv8 n/s/m architecture as Kestrel's (src/model/spec.cc's layer
table and scales, src/model/layers.cc's modules), defined here in plain
torch.nn, and the same training step: forward (bf16 autocast for amp, CUDA
only) -> v8 detection loss in float32 (DFL + CIoU + BCE with a task-aligned
assigner: top-k 10, alpha 0.5, beta 6) -> backward -> clip grad norm 10 ->
SGD (momentum 0.937, nesterov, weight decay 5e-4 on conv/linear weights
only) -> zero_grad -> EMA update, on one random batch made once on the
device. Images/s per model x precision, one JSON object per line on stdout
(the keys train_step_bench prints, "impl": "pytorch-eager"), plus on CUDA the
torch.cuda counters: peak allocated/reserved bytes, the device's used memory
(free before minus free after, train_step_bench's measure) and the GPU
utilisation NVML reports right after the timed steps.

--params-only prints each model's parameter count (all parameters, the DFL
conv's fixed 16 weights included, as Kestrel counts them): the ctest
gpu_reference_params checks that it equals train_step_bench's for n, s, m.

Runs under torch 1.13 (Debian's python3-torch, the CPU test) and 2.x (the
GPU machine). Written for this check, not a training implementation.
"""

import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

REG_MAX = 16
STRIDES = (8, 16, 32)
SCALES = {  # depth, width, max_channels (src/model/spec.cc)
    "n": (0.33, 0.25, 1024),
    "s": (0.33, 0.50, 1024),
    "m": (0.67, 0.75, 768),
    "l": (1.00, 1.00, 512),
    "x": (1.00, 1.25, 512),
    "t": (0.33, 0.125, 1024),
}


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)

    def forward(self, x):
        return F.silu(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1 = Conv(c, c, 3)
        self.cv2 = Conv(c, c, 3)
        self.add = shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c1, c2, n, shortcut):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c_ * 4, c2, 1)
        self.k = k

    def forward(self, x):
        y = [self.cv1(x)]
        for _ in range(3):
            y.append(F.max_pool2d(y[-1], self.k, 1, self.k // 2))
        return self.cv2(torch.cat(y, 1))


class Detect(nn.Module):
    def __init__(self, nc, ch):
        super().__init__()
        c2 = max(16, ch[0] // 4, REG_MAX * 4)
        c3 = max(ch[0], min(nc, 100))
        self.box = nn.ModuleList(
            nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * REG_MAX, 1)) for x in ch)
        self.cls = nn.ModuleList(nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for x in ch)
        self.dfl = nn.Conv2d(REG_MAX, 1, 1, bias=False).requires_grad_(False)
        with torch.no_grad():
            self.dfl.weight.copy_(torch.arange(REG_MAX, dtype=torch.float).view(1, REG_MAX, 1, 1))
            for b, c, s in zip(self.box, self.cls, STRIDES):
                b[-1].bias.fill_(1.0)
                c[-1].bias.fill_(math.log(5 / nc / (640 / s) ** 2))

    def forward(self, xs):
        return [torch.cat((b(x), c(x)), 1) for x, b, c in zip(xs, self.box, self.cls)]


# (from, repeats, kind, channels, kernel, stride, shortcut): src/model/spec.cc's table.
LAYERS = [
    ([-1], 1, "conv", 64, 3, 2, False), ([-1], 1, "conv", 128, 3, 2, False), ([-1], 3, "c2f", 128, 0, 0, True),
    ([-1], 1, "conv", 256, 3, 2, False), ([-1], 6, "c2f", 256, 0, 0, True), ([-1], 1, "conv", 512, 3, 2, False),
    ([-1], 6, "c2f", 512, 0, 0, True), ([-1], 1, "conv", 1024, 3, 2, False), ([-1], 3, "c2f", 1024, 0, 0, True),
    ([-1], 1, "sppf", 1024, 5, 1, False), ([-1], 1, "up", 0, 0, 2, False), ([-1, 6], 1, "cat", 0, 0, 0, False),
    ([-1], 3, "c2f", 512, 0, 0, False), ([-1], 1, "up", 0, 0, 2, False), ([-1, 4], 1, "cat", 0, 0, 0, False),
    ([-1], 3, "c2f", 256, 0, 0, False), ([-1], 1, "conv", 256, 3, 2, False), ([-1, 12], 1, "cat", 0, 0, 0, False),
    ([-1], 3, "c2f", 512, 0, 0, False), ([-1], 1, "conv", 512, 3, 2, False), ([-1, 9], 1, "cat", 0, 0, 0, False),
    ([-1], 3, "c2f", 1024, 0, 0, False), ([15, 18, 21], 1, "detect", 0, 0, 0, False),
]


class Yolo(nn.Module):
    def __init__(self, scale, nc):
        super().__init__()
        depth, width, max_ch = SCALES[scale]
        self.nc = nc
        self.froms = []
        layers, ch = [], []
        for f, n, kind, c, k, s, shortcut in LAYERS:
            cin = [ch[i] if i >= 0 else (ch[-1] if ch else 3) for i in f]
            reps = max(int(math.floor(n * depth + 0.5)), 1) if n > 1 else n
            cout = int(math.ceil(min(c, max_ch) * width / 8) * 8)
            if kind == "conv":
                m = Conv(cin[0], cout, k, s)
            elif kind == "c2f":
                m = C2f(cin[0], cout, reps, shortcut)
            elif kind == "sppf":
                m = SPPF(cin[0], cout, k)
            elif kind == "up":
                m, cout = nn.Upsample(scale_factor=2, mode="nearest"), cin[0]
            elif kind == "cat":
                m, cout = nn.Identity(), sum(cin)
            else:
                m, cout = Detect(nc, cin), 4 * REG_MAX + nc
            layers.append(m)
            self.froms.append(f)
            ch.append(cout)
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        outs = []
        for f, m in zip(self.froms, self.layers):
            if isinstance(m, Detect):
                x = m([outs[i] for i in f])
            elif len(f) > 1:
                x = torch.cat([outs[i] if i >= 0 else x for i in f], 1)
            else:
                x = m(x)
            outs.append(x)
        return x


def ciou(b1, b2, eps=1e-7):
    """CIoU of xyxy boxes (last dim 4), broadcast."""
    b1x1, b1y1, b1x2, b1y2 = b1.unbind(-1)
    b2x1, b2y1, b2x2, b2y2 = b2.unbind(-1)
    w1, h1 = b1x2 - b1x1, b1y2 - b1y1 + eps
    w2, h2 = b2x2 - b2x1, b2y2 - b2y1 + eps
    inter = (torch.min(b1x2, b2x2) - torch.max(b1x1, b2x1)).clamp(0) * \
        (torch.min(b1y2, b2y2) - torch.max(b1y1, b2y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = torch.max(b1x2, b2x2) - torch.min(b1x1, b2x1)
    chh = torch.max(b1y2, b2y2) - torch.min(b1y1, b2y1)
    c2 = cw ** 2 + chh ** 2 + eps
    rho2 = ((b2x1 + b2x2 - b1x1 - b1x2) ** 2 + (b2y1 + b2y2 - b1y1 - b1y2) ** 2) / 4
    v = (4 / math.pi ** 2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)) ** 2
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)


def assign(scores, boxes, anchors, gt_cls, gt_box, gt_mask, topk=10, alpha=0.5, beta=6.0, eps=1e-9):
    """Task-aligned assignment. scores [B,A,C] (sigmoid), boxes [B,A,4] xyxy px, anchors [A,2] px,
    gt_cls [B,M,1], gt_box [B,M,4] xyxy px, gt_mask [B,M,1] -> target boxes, scores, fg mask."""
    b, m = gt_box.shape[:2]
    a = anchors.shape[0]
    if m == 0:
        return torch.zeros_like(boxes), torch.zeros_like(scores), torch.zeros(b, a, dtype=torch.bool,
                                                                               device=scores.device)
    lt, rb = gt_box.view(-1, 1, 4).chunk(2, 2)
    deltas = torch.cat((anchors[None] - lt, rb - anchors[None]), 2).view(b, m, a, 4)
    in_gts = deltas.amin(3).gt(eps)  # [B,M,A]
    mask = in_gts & gt_mask.bool()
    overlaps = torch.zeros(b, m, a, dtype=boxes.dtype, device=boxes.device)
    bbox_scores = torch.zeros_like(overlaps)
    bidx = torch.arange(b, device=scores.device).view(-1, 1).expand(-1, m)
    cls_scores = scores[bidx, :, gt_cls.squeeze(-1).long()]  # [B,M,A]
    bbox_scores[mask] = cls_scores[mask]
    pd = boxes.unsqueeze(1).expand(-1, m, -1, -1)[mask]
    gt = gt_box.unsqueeze(2).expand(-1, -1, a, -1)[mask]
    overlaps[mask] = ciou(gt, pd).squeeze(-1).clamp_(0).to(overlaps.dtype)
    metric = bbox_scores.pow(alpha) * overlaps.pow(beta)
    top_idx = torch.topk(metric, topk, dim=-1, largest=True).indices  # [B,M,k]
    topk_mask = torch.zeros_like(metric, dtype=torch.int8).scatter_(-1, top_idx, 1)
    pos = topk_mask.bool() & mask  # [B,M,A]
    fg = pos.sum(-2)  # [B,A]
    if fg.max() > 1:  # an anchor claimed by several gts goes to the one it overlaps most
        multi = (fg.unsqueeze(1) > 1).expand(-1, m, -1)
        best = F.one_hot(overlaps.argmax(1), m).permute(0, 2, 1).to(pos.dtype)
        pos = torch.where(multi, best, pos)
        fg = pos.sum(-2)
    gt_idx = pos.to(torch.int64).argmax(-2)  # [B,A]
    flat = gt_idx + (torch.arange(b, device=scores.device) * m).unsqueeze(-1)
    t_cls = gt_cls.long().flatten()[flat].clamp_(0)  # [B,A]
    t_box = gt_box.view(-1, 4)[flat]  # [B,A,4]
    t_scores = F.one_hot(t_cls, scores.shape[-1]) * (fg > 0).unsqueeze(-1)
    metric = metric * pos
    pos_metric = metric.amax(-1, keepdim=True)
    pos_overlap = (overlaps * pos).amax(-1, keepdim=True)
    norm = (metric * pos_overlap / (pos_metric + eps)).amax(-2).unsqueeze(-1)
    return t_box, t_scores.to(scores.dtype) * norm, fg > 0


def anchor_grid(maps, device):
    points, strides = [], []
    for x, s in zip(maps, STRIDES):
        h, w = x.shape[2:]
        sy, sx = torch.meshgrid(torch.arange(h, device=device) + 0.5, torch.arange(w, device=device) + 0.5,
                                indexing="ij")
        points.append(torch.stack((sx, sy), -1).view(-1, 2))
        strides.append(torch.full((h * w, 1), float(s), device=device))
    return torch.cat(points), torch.cat(strides)


def detection_loss(maps, nc, batch_idx, cls, bboxes, imgsz, gains=(7.5, 0.5, 1.5)):
    """v8 detection loss: maps [B,64+nc,H,W] x3; targets normalized cx,cy,w,h; imgsz an int or (h, w).
    Returns loss * B and the gained items (box, cls, dfl)."""
    b = maps[0].shape[0]
    dev = maps[0].device
    feats = torch.cat([x.view(b, 4 * REG_MAX + nc, -1) for x in maps], 2)
    distri, logits = feats.split((4 * REG_MAX, nc), 1)
    distri, logits = distri.permute(0, 2, 1).contiguous(), logits.permute(0, 2, 1).contiguous()
    anchors, stride = anchor_grid(maps, dev)
    # targets -> [B, M, 5] (cls, xyxy px)
    counts = torch.bincount(batch_idx.long(), minlength=b)
    m = int(counts.max().item()) if batch_idx.numel() else 0
    gt = torch.zeros(b, m, 5, device=dev)
    if m:
        ih, iw = (imgsz, imgsz) if isinstance(imgsz, int) else imgsz
        xywh = bboxes * torch.tensor([iw, ih, iw, ih], dtype=bboxes.dtype, device=dev)
        xyxy = torch.cat((xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2), 1)
        for i in range(b):
            sel = batch_idx == i
            n = int(sel.sum())
            if n:
                gt[i, :n, 0] = cls[sel, 0]
                gt[i, :n, 1:] = xyxy[sel]
    gt_cls, gt_box = gt.split((1, 4), 2)
    gt_mask = gt_box.sum(2, keepdim=True).gt(0)
    proj = torch.arange(REG_MAX, dtype=torch.float, device=dev)
    dist = distri.view(b, -1, 4, REG_MAX).softmax(3).matmul(proj)
    lt, rb = dist.chunk(2, -1)
    pred = torch.cat((anchors - lt, anchors + rb), -1)  # grid units
    t_box, t_scores, fg = assign(logits.detach().sigmoid(), (pred.detach() * stride).to(gt_box.dtype),
                                 anchors * stride, gt_cls, gt_box, gt_mask)
    t_sum = max(t_scores.sum(), 1)
    loss_cls = F.binary_cross_entropy_with_logits(logits, t_scores, reduction="none").sum() / t_sum
    loss_box = torch.zeros((), device=dev)
    loss_dfl = torch.zeros((), device=dev)
    if fg.sum():
        t_box = t_box / stride
        weight = t_scores.sum(-1)[fg].unsqueeze(-1)
        iou = ciou(pred[fg], t_box[fg]).unsqueeze(-1)
        loss_box = ((1.0 - iou) * weight).sum() / t_sum
        t_lt, t_rb = t_box.chunk(2, -1)
        t_ltrb = torch.cat((anchors - t_lt, t_rb - anchors), -1).clamp_(0, REG_MAX - 1 - 0.01)[fg]
        tl = t_ltrb.long()
        wl = tl + 1 - t_ltrb
        d = distri[fg].view(-1, REG_MAX)
        dfl = (F.cross_entropy(d, tl.view(-1), reduction="none").view(tl.shape) * wl +
               F.cross_entropy(d, (tl + 1).view(-1), reduction="none").view(tl.shape) * (1 - wl)).mean(-1,
                                                                                                      keepdim=True)
        loss_dfl = (dfl * weight).sum() / t_sum
    items = torch.stack((loss_box * gains[0], loss_cls * gains[1], loss_dfl * gains[2])).detach()
    return (loss_box * gains[0] + loss_cls * gains[1] + loss_dfl * gains[2]) * b, items


def param_groups(model):
    decayed, norm, biases = [], [], []
    for mod in model.modules():
        for name, p in mod.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            if name == "bias":
                biases.append(p)
            elif isinstance(mod, nn.BatchNorm2d):
                norm.append(p)
            else:
                decayed.append(p)
    return decayed, norm, biases


class Ema:
    def __init__(self, model, decay=0.9999, tau=2000.0):
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.decay, self.tau, self.updates = decay, tau, 0

    @torch.no_grad()
    def update(self, model):
        self.updates += 1
        d = self.decay * (1 - math.exp(-self.updates / self.tau))
        for k, v in model.state_dict().items():
            if v.dtype.is_floating_point:
                self.state[k].mul_(d).add_(v.detach(), alpha=1 - d)


def device_of(text):
    if text == "cpu":
        return torch.device("cpu")
    if text.isdigit():
        return torch.device("cuda", int(text))
    return torch.device(text)


def run_one(args, scale, precision, dev):
    line = {"bench": "train_step", "impl": "pytorch-eager", "model": scale, "precision": precision,
            "device": args.device, "imgsz": args.imgsz, "batch": args.batch, "iterations": args.iterations,
            "warmup": args.warmup, "nc": args.nc, "threads": args.threads, "torch": "PyTorch " + torch.__version__}
    amp = precision == "amp"
    if amp and dev.type != "cuda":
        line["skipped"] = "amp is CUDA-only (bf16 autocast), as in Kestrel"
        return line
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        free0 = torch.cuda.mem_get_info(dev)[0]
    torch.manual_seed(0)
    model = Yolo(scale, args.nc).to(dev).train()
    line["params"] = sum(p.numel() for p in model.parameters())
    decayed, norm, biases = param_groups(model)
    opt = torch.optim.SGD(biases, lr=0.01, momentum=0.937, nesterov=True)
    opt.add_param_group({"params": decayed, "weight_decay": 5e-4})
    opt.add_param_group({"params": norm, "weight_decay": 0.0})
    ema = Ema(model)
    b, k = args.batch, args.boxes
    images = torch.rand(b, 3, args.imgsz, args.imgsz, device=dev)
    batch_idx = torch.arange(b, dtype=torch.float, device=dev).repeat_interleave(k)
    cls = torch.randint(0, args.nc, (b * k, 1), device=dev).float()
    bboxes = torch.cat((torch.rand(b * k, 2, device=dev) * 0.6 + 0.2, torch.rand(b * k, 2, device=dev) * 0.25 + 0.05),
                       1)
    n = args.warmup + args.iterations
    last = 0.0
    t0 = time.perf_counter()
    for i in range(n):
        if i == args.warmup:
            if cuda:
                torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
        if amp:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                maps = model(images)
        else:
            maps = model(images)
        loss, items = detection_loss([x.float() for x in maps], args.nc, batch_idx, cls, bboxes, args.imgsz)
        last = float(items.sum().item())  # the trainer reads the items every iteration
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        opt.zero_grad()
        ema.update(model)
    if cuda:
        torch.cuda.synchronize(dev)
    seconds = time.perf_counter() - t0
    line["images_per_s"] = b * args.iterations / seconds
    line["ms_per_iter"] = 1e3 * seconds / args.iterations
    line["loss"] = last
    if cuda:
        free1, total = torch.cuda.mem_get_info(dev)
        line["device_mem_used_bytes"] = free0 - free1
        line["device_mem_total_bytes"] = total
        line["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
        line["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
        try:
            line["gpu_utilization_pct"] = torch.cuda.utilization(dev)
        except Exception as e:  # NVML missing: say so instead of a number
            line["gpu_utilization_pct"] = None
            line["gpu_utilization_error"] = str(e).splitlines()[0][:200]
    del model, opt, ema, images
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="n,s,m")
    ap.add_argument("--precisions", default="fp32,amp")
    ap.add_argument("--device", default="cpu", help="cpu, N, cuda or cuda:N")
    ap.add_argument("--imgsz", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--nc", type=int, default=80)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--boxes", type=int, default=3)
    ap.add_argument("--params-only", action="store_true")
    args = ap.parse_args()
    models = args.models.split(",")
    for m in models:
        if m not in SCALES:
            ap.error("--models: unknown scale %r (one of %s)" % (m, ",".join(SCALES)))
    precisions = args.precisions.split(",")
    for p in precisions:
        if p not in ("fp32", "amp"):
            ap.error("--precisions: %r is not fp32 or amp" % p)
    if args.imgsz < 32 or args.imgsz % 32 or args.batch < 1 or args.iterations < 1 or args.warmup < 0:
        ap.error("imgsz a positive multiple of 32, batch and iterations >= 1, warmup >= 0")
    if args.params_only:
        for m in models:
            n = sum(p.numel() for p in Yolo(m, args.nc).parameters())
            print(json.dumps({"bench": "train_step", "impl": "pytorch-eager", "model": m, "nc": args.nc,
                              "params": n}))
        return 0
    torch.set_num_threads(args.threads)
    dev = device_of(args.device)
    failures = 0
    for m in models:
        for p in precisions:
            try:
                line = run_one(args, m, p, dev)
            except RuntimeError as e:  # CUDA OOM among them: that line's error, the next still runs
                line = {"bench": "train_step", "impl": "pytorch-eager", "model": m, "precision": p,
                        "device": args.device, "error": str(e).splitlines()[0][:500]}
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            print(json.dumps(line), flush=True)
            failures += "error" in line
            if "images_per_s" in line:
                print("%-10s %9.2f images/s  %8.1f ms/iter" % (m + " " + p, line["images_per_s"],
                                                                line["ms_per_iter"]), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
