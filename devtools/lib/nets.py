"""The networks of the synthetic stand-ins: each function returns a torch module in eval mode with
its fixed weights (trained O-Net weights for the detector, seeded random ones elsewhere).

What the files built from them are, and how they are exported, cached and linked, is the business
of the modules that call these: ``devtools.synthetic_models`` (InsightFace packs, INSwapper),
``devtools.synthetic_swappers`` (every swapper family, GPEN, converters),
``devtools.synthetic_masks`` (XSeg, BiSeNet) and the unit tests that build their own tiny
signatures. Here rather than beside them: see ``devtools.lib``. Seeds and construction order are
those the files have always been built with, so the builds stay byte-for-byte the same.
"""
from __future__ import annotations

# --------------------------------------------------------------------------- synthetic_models

# (stride, window sizes of its two anchors) in detector-input pixels; ~1.63x apart so O-Net,
# which tolerates about that much scale error, sees every face size from ~40 to ~650 px.
DET_WINDOWS = ((8, (48, 80)), (16, (128, 208)), (32, (336, 544)))
# O-Net is confident on some non-faces (p 0.9-0.99): map its logit so only p > 0.9975 passes 0.5.
DET_LOGIT_SCALE, DET_LOGIT_SHIFT = 0.5, 3.0


def detector_module():
    """MTCNN's O-Net (trained weights from the facenet-pytorch wheel) as one SCRFD-shaped graph
    (devtools.synthetic_models explains the windows and outputs)."""
    import torch
    import torch.nn.functional as F
    from facenet_pytorch.models.mtcnn import ONet
    from torch import nn

    class DenseONet(nn.Module):
        """O-Net with its dense layers turned into convolutions: one output per 48x48 window,
        stride 8. facenet's O-Net flattens (W, H, C), hence the permute of dense5."""

        def __init__(self):
            super().__init__()
            o = ONet(pretrained=True).eval()
            self.features = nn.Sequential(o.conv1, o.prelu1, o.pool1, o.conv2, o.prelu2, o.pool2,
                                          o.conv3, o.prelu3, o.pool3, o.conv4, o.prelu4)
            self.dense5 = nn.Conv2d(128, 256, 3)
            w5 = o.dense5.weight.data.view(256, 3, 3, 128)  # (out, W, H, C)
            self.dense5.weight.data = w5.permute(0, 3, 2, 1).contiguous()
            self.dense5.bias.data = o.dense5.bias.data.clone()
            self.prelu5 = o.prelu5
            self.heads = nn.ModuleList()
            for d in (o.dense6_1, o.dense6_2, o.dense6_3):
                c = nn.Conv2d(256, d.out_features, 1)
                c.weight.data = d.weight.data[:, :, None, None].clone()
                c.bias.data = d.bias.data.clone()
                self.heads.append(c)

        def forward(self, x):
            x = self.features(x)
            x = self.prelu5(self.dense5(x))  # PReLU acts on dim 1 either way
            cls, box, pts = (h(x) for h in self.heads)
            return cls[:, 1:2] - cls[:, 0:1], box, pts  # face logit, box reg, 5 x then 5 y

    def coords(like, axis):
        """0, 1, 2, ... along ``axis`` (3: x, 2: y), shaped like ``like``'s first channel."""
        return torch.ones_like(like[:, :1]).cumsum(axis) - 1

    class ScrfdStandIn(nn.Module):
        def __init__(self):
            super().__init__()
            self.onet = DenseONet()

        def windows(self, x, size):
            """Absolute boxes/landmarks (input pixels) of windows of ``size`` px centred on a
            grid of step size/6: O-Net window n sits at 8n in the rescaled, padded image."""
            r = 48.0 / size
            pad = size // 2
            # extra right/bottom padding guarantees enough windows to cover every anchor
            x = F.pad(x, (pad, pad + size // 3, pad, pad + size // 3), value=-127.5 / 128)
            k = 1
            while k * 2 * r <= 1.0:
                k *= 2
            if k > 1:  # area-style downscale first, so small rescales do not alias
                x = F.avg_pool2d(x, k)
            if abs(r * k - 1.0) > 1e-6:
                x = F.interpolate(x, scale_factor=r * k, mode="bilinear", align_corners=False)
            logit, box, pts = self.onet(x)
            step = 8.0 / r  # window step in input pixels (= size / 6)
            cx, cy = coords(logit, 3) * step, coords(logit, 2) * step  # window centres
            x0, y0 = cx - size / 2, cy - size / 2
            edges = torch.cat([x0 + box[:, 0:1] * size, y0 + box[:, 1:2] * size,
                               x0 + size + box[:, 2:3] * size, y0 + size + box[:, 3:4] * size], 1)
            px, py = x0 + pts[:, 0:5] * size, y0 + pts[:, 5:10] * size
            kps = torch.stack([px, py], 2).flatten(1, 2)  # x0, y0, x1, y1, ... like SCRFD
            return logit, edges, kps, step

        def forward(self, img):
            h, w = img.shape[2], img.shape[3]
            scores, boxes, kpss = [], [], []
            for stride, sizes in DET_WINDOWS:
                per_anchor = []
                for size in sizes:
                    logit, edges, kps, step = self.windows(img, size)
                    maps = torch.cat([logit, edges, kps], 1)
                    # nearest window for each anchor; absolute coordinates survive the resampling
                    if abs(step - stride) > 1e-6:
                        maps = F.interpolate(maps, scale_factor=step / stride, mode="nearest")
                    maps = maps[:, :, : h // stride, : w // stride]
                    ax, ay = coords(maps, 3) * stride, coords(maps, 2) * stride
                    score = torch.sigmoid(maps[:, 0:1] * DET_LOGIT_SCALE - DET_LOGIT_SHIFT)
                    e = maps[:, 1:5]
                    dist = torch.cat([ax - e[:, 0:1], ay - e[:, 1:2], e[:, 2:3] - ax, e[:, 3:4] - ay], 1)
                    k = maps[:, 5:15]
                    kd = k - torch.cat([ax, ay] * 5, 1)
                    per_anchor.append((score, dist / stride, kd / stride))
                # rows are (y, x, anchor), the order SCRFD's anchor centres use
                for out, idx, width in ((scores, 0, 1), (boxes, 1, 4), (kpss, 2, 10)):
                    t = torch.stack([a[idx] for a in per_anchor], 1)  # [1, A, C, h, w]
                    out.append(t.permute(0, 3, 4, 1, 2).reshape(-1, width))
            return (*scores, *boxes, *kpss)

    return ScrfdStandIn().eval()


def recognizer_module():
    """ArcFace-signature recogniser: [N,3,112,112] -> [N,512], a small random convnet."""
    import torch
    from torch import nn

    torch.manual_seed(1)
    # A random net maps every face to nearly the same direction (cosine ~0.95): normalising
    # each crop and keeping the layout (strided convs, no global pooling) spreads different
    # faces apart while shifted crops of one face stay close.
    return nn.Sequential(
        nn.InstanceNorm2d(3), nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.Tanh(),
        nn.Conv2d(16, 32, 3, 2, 1, bias=False), nn.Tanh(), nn.Conv2d(32, 32, 3, 2, 1, bias=False),
        nn.AvgPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 512, bias=False)).eval()


def landmark_module(layout, points: int):
    """1k3d68-signature landmarks: ``points`` x/y/z in -1..1 crop units, the last 68 ``layout``
    (a mean face, z = 0) moved by 0.01 x tanh(random net of the crop)."""
    import torch
    from torch import nn

    class LandmarkStandIn(nn.Module):
        """Mean face (z = 0) + 0.01 x tanh(random net of the crop), in -1..1 crop units."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 5, stride=4, padding=2)   # 192 -> 48
            self.pool = nn.AvgPool2d(12)                           # 48 -> 4
            self.fc = nn.Linear(8 * 4 * 4, points * 3)
            mean_face = torch.zeros(points, 3)
            mean_face[-68:, :2] = torch.tensor(layout)
            self.register_buffer("layout", mean_face.flatten())

        def forward(self, x):
            x = (x - 127.5) * (1.0 / 128.0)  # first nodes Sub, Mul: insightface then feeds raw pixels
            h = self.pool(torch.relu(self.conv(x))).flatten(1)
            return self.layout + 0.01 * torch.tanh(self.fc(h))

    torch.manual_seed(6)
    return LandmarkStandIn().eval()


def swapper_module(size: int):
    """INSwapper-signature swapper and example inputs: (module, (target [1,3,size,size], source [1,512]))."""
    import torch
    from torch import nn

    class TinySwapper(nn.Module):
        """Output = target nudged by a source-dependent random convnet, through a sigmoid:
        the result stays recognisably the target face and changes with the source."""

        def __init__(self):
            super().__init__()
            self.enc = nn.Conv2d(3, 16, 3, 1, 1)
            self.style = nn.Linear(512, 16)
            self.style.weight.data *= 20  # unit-norm latents would barely move the output
            self.dec = nn.Conv2d(16, 3, 3, 1, 1)

        def forward(self, target, source):
            h = torch.relu(self.enc(target) + self.style(source)[:, :, None, None])
            base = torch.logit(target.clamp(0.01, 0.99))
            return torch.sigmoid(base + 3 * torch.tanh(self.dec(h)))

    torch.manual_seed(2)
    return TinySwapper().eval(), (torch.rand(1, 3, size, size), torch.randn(1, 512))


def tiny_convnet():
    """Three-channel conv, ReLU, conv (seed 5): a valid module that is no face model."""
    import torch
    from torch import nn

    torch.manual_seed(5)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))


# --------------------------------------------------------------------------- synthetic_swappers

def swapper_family_module(size: int, source, norm, output: str, seed: int):
    """One swapper family's signature and example inputs (devtools.synthetic_swappers.SWAPPERS):
    ``source`` "emb" ([1,512]) or a face size ([1,3,s,s]); ``norm`` the family's (mean, std) or one
    triple for both; ``output`` "denorm" (the input's normalised space) or "unit" ([0,1])."""
    import torch
    from torch import nn

    mean, std = norm if isinstance(norm[0], tuple) else (norm, norm)

    class StandIn(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1))
            self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1))
            self.enc = nn.Conv2d(3, 16, 3, 1, 1)
            if source == "emb":
                self.style = nn.Linear(512, 16)
                self.style.weight.data *= 20  # unit-norm embeddings would barely move the output
            else:
                self.style = nn.Conv2d(3, 16, 8, 8)
                self.style.weight.data *= 4
            self.dec = nn.Conv2d(16, 3, 3, 1, 1)

        def forward(self, target, src):
            x = target * self.std + self.mean            # back to RGB in [0,1]
            s = self.style(src) if source == "emb" else self.style(src).mean(dim=(2, 3))
            h = torch.relu(self.enc(x) + s[:, :, None, None])
            y = torch.sigmoid(torch.logit(x.clamp(0.01, 0.99)) + 1.5 * torch.tanh(self.dec(h)))
            return (y - self.mean) / self.std if output == "denorm" else y

    torch.manual_seed(seed)
    src = torch.randn(1, 512) if source == "emb" else torch.rand(1, 3, source, source)
    return StandIn().eval(), (torch.rand(1, 3, size, size), src)


def gpen_module(seed: int):
    """GPEN-BFR signature: [1,3,S,S] in [-1,1] -> the same, near the input."""
    import torch

    torch.manual_seed(seed)
    conv = torch.nn.Conv2d(3, 3, 3, 1, 1)

    class Gpen(torch.nn.Module):
        """Stays near the input (a small learned-looking nudge), in [-1,1] like GPEN."""

        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x):
            x = x.clamp(-0.98, 0.98)
            inner = 0.5 * torch.log((1 + x) / (1 - x))      # atanh (not exportable at opset 17)
            return torch.tanh(inner + 0.3 * torch.tanh(self.conv(x)))

    return Gpen().eval()


def converter_module(seed: int):
    """FaceFusion's embedding converters: [1,512] -> [1,512], one random linear map."""
    import torch

    torch.manual_seed(seed)
    return torch.nn.Linear(512, 512).eval()


# --------------------------------------------------------------------------- synthetic_masks

def xseg_module():
    """XSeg signature: NHWC [1,256,256,3] (BGR 0..1) -> [1,256,256,1] in 0..1."""
    import torch
    from torch import nn

    class TinyXSeg(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 1, 5, 1, 2)

        def forward(self, x):
            y = torch.sigmoid(self.conv(x.permute(0, 3, 1, 2)))
            return y.permute(0, 2, 3, 1)

    torch.manual_seed(6)
    return TinyXSeg().eval()


def bisenet_module():
    """BiSeNet signature: [N,3,512,512] -> three [N,19,512,512] logit maps."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class TinyBiSeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Conv2d(3, 8, 8, 8)
            self.heads = nn.ModuleList(nn.Conv2d(8, 19, 1) for _ in range(3))

        def forward(self, x):
            h = torch.relu(self.down(x))
            return tuple(F.interpolate(head(h), (512, 512), mode="bilinear", align_corners=True)
                         for head in self.heads)

    torch.manual_seed(7)
    return TinyBiSeNet().eval()


# --------------------------------------------------------------------------- unit tests' own

def tiny_scrfd_module(strides, batched: bool):
    """SCRFD's 9 outputs (2 anchors, keypoints) for ``strides``, from one 1x1 conv per stride
    (seed 5): 3-D [N, anchors, C] outputs when ``batched``, else 2-D [anchors, C] as buffalo_l's
    det_10g.onnx (tests/unit/backends/test_empty_batches.py)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(5)
            self.heads = nn.ModuleList(nn.Conv2d(3, 30, 1) for _ in strides)

        def forward(self, x):
            per = []
            for s, head in zip(strides, self.heads):
                y = head(F.avg_pool2d(x, s)).permute(0, 2, 3, 1)      # rows (y, x, anchor)
                y = y.reshape(x.shape[0], -1, 15) if batched else y.reshape(-1, 15)
                per.append((torch.sigmoid(y[..., :1]), F.softplus(y[..., 1:5]) + 1.0, y[..., 5:]))
            return (*[p[0] for p in per], *[p[1] for p in per], *[p[2] for p in per])

    return Tiny().eval()


def landmark_2d106_module():
    """2d106det.onnx's signature: [N,3,192,192] -> [N,212] (106 x 2), seed 0."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.AvgPool2d(48), nn.Flatten(), nn.Linear(48, 212)).eval()
