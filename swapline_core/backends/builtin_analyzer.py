"""Face analysis with models that ship inside pip packages: MTCNN boxes + dlib landmarks/descriptor.

Works on any machine with no model downloads, so the pack is usable before the user adds an
InsightFace pack. Detection is facenet-pytorch's MTCNN; landmarks and identity come from dlib
(its recognition network run by torch on the analyzer's device: ``dlib_resnet``).

Facts this module relies on (checked on facenet-pytorch 2.5.3, dlib 20.0, numpy 2):
- MTCNN's five points are left eye, right eye, nose, left mouth, right mouth with the
  *image*-left point first (also on mirrored images), the same order as InsightFace's.
- ``MTCNN.detect`` on a 4-D array returns object arrays; an image without faces gives ``None``.
  Batched input must be one size (it raises otherwise), so frames are grouped by shape and
  sent in chunks of ``batch_size``; a batch gives the same boxes as single frames.
- dlib's 68-point predictor was trained on dlib HOG boxes, which are tighter than MTCNN boxes
  and upright. Feeding it the raw MTCNN box fails on rolled heads; running it on a
  roll-corrected chip with a box derived from the five points fixes that and leaves frontal
  faces unchanged.

Distances: dlib's documented rule is "same person when the raw descriptors are < 0.6 apart".
Raw descriptors are NOT unit length and we store L2-normalised ones, so distances shrink by
about 1/1.5: the normalised rule is ``distance < 0.4`` (:data:`SAME_PERSON_DISTANCE`), a cosine
similarity of 0.92 (for unit vectors ``distance**2 == 2 - 2 * cosine``); see :func:`distance`
and :func:`similarity`. The measurements behind these choices (descriptor norms, distances
between and within people, landmark errors, chip geometry) are in
docs/measurements/builtin_analyzer.md.
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..interfaces import FaceAnalyzer
from ..parallel import map_frames
from ..types import Face, as_rgb_uint8, l2_normalise
from . import builtin_models as bm
from . import dlib_resnet

# Share of min_face_size a box may fall short by and still count (see _faces).
SIZE_TOLERANCE = 0.9
# MTCNN batches run at once (see detect): two, on two cores; more only queue on torch's threads.
# Only for small images (QA's 320 px windows): a batch of 720p frames holds ~0.3 GB of pyramid
# activations, and two at once raised a 720p job's peak RSS by ~200 MB for ~7 % of detect time.
DETECT_THREADS = 2
THREADED_MAX_PIXELS = 512 * 512
# dlib's raw-descriptor threshold 0.6, rescaled to normalised vectors (module docstring).
SAME_PERSON_DISTANCE = 0.4

# Landmark chip geometry, in units of the eye-mid to mouth-mid distance: fitted to where dlib's
# HOG detector puts its box on roll-corrected chips (docs/measurements/builtin_analyzer.md).
# Small faces are upscaled to 50 px
# per unit; large ones keep their resolution, since dlib returns integer points on the chip.
_CHIP_MIN_UNIT = 50.0
_CHIP_SIZE = 4.0
_CHIP_BOX = 2.2
_CHIP_BOX_DY = -0.06


def distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distance between normalised dlib embeddings (same person below ~0.4)."""
    return np.linalg.norm(np.asarray(a, np.float32) - np.asarray(b, np.float32), axis=-1)


def similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity; for unit vectors ``similarity = 1 - distance**2 / 2``."""
    return np.sum(np.asarray(a, np.float32) * np.asarray(b, np.float32), axis=-1)


class BuiltinAnalyzer(FaceAnalyzer):
    name = "builtin"
    recognizer_name = "dlib_resnet_v1"
    embedding_dim = 128
    supports_landmarks = True
    supports_refine = True

    def __init__(self, threshold: float = 0.9, min_face_size: int = 20, batch_size: int = 8,
                 device: str = "cpu", num_jitters: int = 0) -> None:
        super().__init__()
        self.threshold = float(threshold)
        self.min_face_size = int(min_face_size)
        self.batch_size = max(1, int(batch_size))
        self.device = device
        self.num_jitters = int(num_jitters)
        # Per image of the last detect() call: faces dropped and why, for QA reports.
        self.skipped: list[list[dict]] = []
        self.providers = {"mtcnn": [f"torch:{device}"], "dlib_landmarks": ["dlib:cpu"],
                          "dlib_recognition": [f"torch:{device}"] if num_jitters <= 1 else ["dlib:cpu"]}

    # -- detection ---------------------------------------------------------------------------
    def detect(self, images: Sequence[np.ndarray], min_face: float | None = None) -> list[list[Face]]:
        rgb = [as_rgb_uint8(im) for im in images]
        # MTCNN's pyramid stops at its min size; 12 px is the smallest its PNet can see.
        model = bm.mtcnn(min_face_size=_pyramid_start(max(12, self.min_face_size), min_face),
                         device=self.device)
        out: list[list[Face]] = [[] for _ in rgb]
        self.skipped = [[] for _ in rgb]
        groups: dict[tuple, list[int]] = {}
        smallest = max(12, self.min_face_size)
        for i, im in enumerate(rgb):
            if min(im.shape[:2]) < smallest:
                # MTCNN's image pyramid is empty below its min size (torch.cat of nothing): report
                # the size instead of crashing
                self.skipped[i].append({"reason": f"image {im.shape[1]}x{im.shape[0]} px is smaller than the "
                                                  f"smallest detectable face ({smallest} px)"})
                continue
            groups.setdefault(im.shape, []).append(i)
        batches = [indices[start:start + self.batch_size]
                   for indices in groups.values() for start in range(0, len(indices), self.batch_size)]

        def run(chunk: list[int]):
            # Always 4-D, so MTCNN returns per-image results even for a single frame.
            return model.detect(np.stack([rgb[i] for i in chunk]), landmarks=True)

        # Two batches of small images at a time: MTCNN is many small torch ops with Python between
        # them, which one batch leaves a core idle in; each batch's result is the same as alone.
        small = all(rgb[b[0]].shape[0] * rgb[b[0]].shape[1] <= THREADED_MAX_PIXELS for b in batches)
        threads = DETECT_THREADS if small else 1
        for chunk, (boxes, probs, points) in zip(batches, map_frames(run, batches, workers=threads)):
            for j, i in enumerate(chunk):
                out[i] = self._faces(boxes[j], probs[j], points[j], self.skipped[i])
        return out

    def refine(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> list[list[Face | None]]:
        """MTCNN's last stage alone: ONet on each face's box made square (as MTCNN feeds it RNet's
        boxes), one batch for all faces. Its box regression, points and score are what the full
        cascade gives for a candidate there; PNet's pyramid and RNet, most of a detection's cost,
        are skipped. A score below the analyzer's threshold gives None."""
        import torch
        from facenet_pytorch.models.utils.detect_face import bbreg, imresample, pad, rerec

        # the instance detect() uses without a hint: ONet's weights are the same in all of them
        model = bm.mtcnn(min_face_size=max(12, self.min_face_size), device=self.device)
        owners, crops, boxes = [], [], []
        for i, (im, fs) in enumerate(zip(images, faces)):
            rgb = as_rgb_uint8(im)
            h, w = rgb.shape[:2]
            for j, f in enumerate(fs):
                box = rerec(torch.tensor([[*map(float, f.bbox), 0.0]], dtype=torch.float32))
                y, ey, x, ex = (int(v[0]) for v in pad(box, w, h))
                if ey <= y - 1 or ex <= x - 1:
                    continue
                # facenet's order: float NCHW first, then the area resample of the crop
                crop = torch.as_tensor(np.ascontiguousarray(rgb[y - 1:ey, x - 1:ex])).permute(2, 0, 1)[None].float()
                crops.append(imresample(crop, (48, 48)))
                boxes.append(box)
                owners.append((i, j))
        out: list[list[Face | None]] = [[None] * len(fs) for fs in faces]
        if not crops:
            return out
        with torch.inference_mode():
            reg, pts, prob = model.onet((torch.cat(crops).to(self.device) - 127.5) * 0.0078125)
        box = torch.cat(boxes)
        wi, hi = (box[:, 2] - box[:, 0] + 1)[:, None], (box[:, 3] - box[:, 1] + 1)[:, None]
        kps = torch.stack([wi * pts[:, :5].cpu() + box[:, :1] - 1, hi * pts[:, 5:].cpu() + box[:, 1:2] - 1], 2)
        final = bbreg(box, reg.cpu())[:, :4]
        for (i, j), b, k, p in zip(owners, final.numpy(), kps.numpy(), prob[:, 1].cpu().numpy()):
            if p >= self.threshold:
                out[i][j] = Face(bbox=b.astype(np.float32), kps=k.astype(np.float32), score=float(p))
        return out

    def _faces(self, boxes, probs, points, skipped: list[dict]) -> list[Face]:
        if boxes is None:
            return []
        boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
        probs = np.asarray(probs, np.float32).reshape(-1)
        points = np.asarray(points, np.float32).reshape(-1, 5, 2)
        faces = []
        for box, prob, kps in zip(boxes, probs, points):
            # Face size is its box height: MTCNN boxes are ~0.8x as wide as tall, so testing
            # the width dropped faces 20-25 px tall that min_face_size=20 promises to keep (the
            # kling-avatar face scaled to 20-25 px tall in 1280x720 gets 16-21 px wide boxes).
            # Box heights jitter by a pixel or two from frame to frame (19-20 px for a face
            # drawn 20 px tall), hence the tolerance: otherwise a face at the limit flickers.
            size = float(max(box[2] - box[0], box[3] - box[1]))
            reason = None
            if prob < self.threshold:
                reason = f"score {prob:.3f} below threshold {self.threshold:g}"
            elif size < SIZE_TOLERANCE * self.min_face_size:
                reason = f"face {size:.0f} px tall, smaller than min_face_size {self.min_face_size}"
            if reason:
                skipped.append({"bbox": [round(float(v), 1) for v in box],
                                "score": round(float(prob), 4), "reason": reason})
                continue
            faces.append(Face(bbox=box.copy(), kps=kps.copy(), score=float(prob)))
        faces.sort(key=lambda f: -f.score)
        return faces

    # -- landmarks ---------------------------------------------------------------------------
    def landmarks68(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> None:
        predictor = bm.shape_predictor("shape68")
        dlib = bm.import_dlib()
        for image, image_faces in zip(images, faces):
            if not image_faces:
                continue
            rgb = as_rgb_uint8(image)
            for face in image_faces:
                face.landmarks = _landmarks_on_chip(rgb, face.kps, predictor, dlib)

    # -- identity ----------------------------------------------------------------------------
    def embed(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> None:
        """Fill embeddings; also fills ``face.landmarks`` where missing (dlib aligns on them)."""
        dlib = bm.import_dlib()
        batch_imgs, batch_dets, batch_faces = [], [], []
        for image, image_faces in zip(images, faces):
            if not image_faces:
                continue
            rgb = as_rgb_uint8(image)
            todo = [f for f in image_faces if f.landmarks is None]
            if todo:
                self.landmarks68([rgb], [todo])
            dets = dlib.full_object_detections()
            for face in image_faces:
                dets.append(_to_dlib_shape(face.landmarks, dlib))
            batch_imgs.append(rgb)
            batch_dets.append(dets)
            batch_faces.append(image_faces)
        if not batch_imgs:
            return
        if self.num_jitters <= 1:
            # dlib's own chips (its alignment, 150 px, padding 0.25), dlib's network run by torch
            chips = [c for img, dets in zip(batch_imgs, batch_dets)
                     for c in dlib.get_face_chips(img, dets, dlib_resnet.CHIP_SIZE, dlib_resnet.CHIP_PADDING)]
            flat = iter(dlib_resnet.descriptors(bm.face_recognizer_torch(self.device), chips))
            vectors = [[next(flat) for _ in dets] for dets in batch_dets]
        else:
            # jittered descriptors: dlib's own random crops, batched by dlib
            vectors = bm.face_recognizer().compute_face_descriptor(batch_imgs, batch_dets, self.num_jitters)
        for image_faces, image_vectors in zip(batch_faces, vectors):
            for face, vec in zip(image_faces, image_vectors):
                face.embedding = l2_normalise(np.asarray(vec, np.float32))

    def model_files(self) -> list[tuple[str, str]]:
        return bm.model_files()


def _pyramid_start(default: float, min_face: float | None) -> float:
    """MTCNN's min face size for a ``min_face`` hint: the largest face size of the default pyramid
    (``default`` / factor**k) not above the hint. The levels kept are then exactly the default
    pyramid's coarser ones, so a face of at least ``min_face`` px gets the same candidates, and
    the same box, as without the hint; the finer levels dropped are most of PNet's pixels."""
    if not min_face or min_face <= default:
        return float(default)
    levels = int(np.floor(np.log(default / float(min_face)) / np.log(bm.MTCNN_FACTOR) + 1e-9))
    return float(default) / bm.MTCNN_FACTOR ** levels


def _landmarks_on_chip(rgb: np.ndarray, kps: np.ndarray, predictor, dlib) -> np.ndarray:
    """68 points for one face: predict on an upright, scale-normalised chip, map back."""
    kps = np.asarray(kps, np.float64)
    eyes, mouth = (kps[0] + kps[1]) / 2, (kps[3] + kps[4]) / 2
    # Eye-mouth distance tracks face size under yaw; inter-ocular guards against pitch.
    size = max(np.linalg.norm(eyes - mouth), 0.8 * np.linalg.norm(kps[1] - kps[0]), 1.0)
    angle = np.degrees(np.arctan2(kps[1, 1] - kps[0, 1], kps[1, 0] - kps[0, 0]))
    centre = kps.mean(axis=0)
    unit = max(_CHIP_MIN_UNIT, size)
    side = int(round(_CHIP_SIZE * unit))
    m = cv2.getRotationMatrix2D((float(centre[0]), float(centre[1])), float(angle), unit / size)
    m[:, 2] += side / 2.0 - centre
    chip = cv2.warpAffine(rgb, m, (side, side), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)
    cx, cy, half = side / 2.0, side / 2.0 + _CHIP_BOX_DY * unit, _CHIP_BOX * unit / 2.0
    rect = dlib.rectangle(int(round(cx - half)), int(round(cy - half)),
                          int(round(cx + half)), int(round(cy + half)))
    shape = predictor(chip, rect)
    pts = np.array([[p.x, p.y] for p in shape.parts()], np.float64)
    inv = cv2.invertAffineTransform(m)
    return (pts @ inv[:, :2].T + inv[:, 2]).astype(np.float32)


def _to_dlib_shape(landmarks: np.ndarray, dlib):
    pts = np.rint(np.asarray(landmarks, np.float64)).astype(np.int64)
    x0, y0 = pts.min(axis=0)
    x1, y1 = pts.max(axis=0)
    parts = dlib.points([dlib.point(int(x), int(y)) for x, y in pts])
    return dlib.full_object_detection(dlib.rectangle(int(x0), int(y0), int(x1), int(y1)), parts)
