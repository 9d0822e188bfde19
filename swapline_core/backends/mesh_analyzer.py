"""Face analysis from commercially usable models that need no download: BlazeFace + MediaPipe mesh.

Detection is BlazeFace short range (``blazeface``) on the frame and on tiles of it, each detection
checked and placed by MediaPipe's 468-point face mesh (``face_mesh``): the five points, the box and
the 68 dlib-layout points (``mesh68``) all come from the mesh. Identity is the same dlib ResNet
descriptor as the built-in analyzer (CC0; aligned on the mesh's 68 points), so face models and
QA thresholds made with either analyzer compare (same ``recognizer_name``).

Every model here is Apache-2.0 (MediaPipe) or CC0 (dlib's recognition network): unlike the
MTCNN + dlib pack, nothing reads dlib's 68-point predictor, whose training data excludes
commercial use. The files ship with the pack in ``mesh_models.DEFAULT_DIR`` (models/mediapipe/).

Eyes and brows: the mesh's 71 points around each eye are replaced by the iris model's (MediaPipe's
"refine landmarks" step), which halved the eye points' distance to dlib's on the image-left eye.

Batching: the detector's graph flattens a batch into one anchor axis, so it runs tile by tile (a
loop of invokes, ~0.7 ms each); the mesh and iris models run a batch of faces (``MESH_BATCH``, eyes
twice that) per invoke, with the same output as one by one.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..types import Face, as_rgb_uint8
from . import blazeface as bf
from . import builtin_models as bm
from . import face_mesh as fm
from . import mesh68
from . import mesh_models as mm
from .builtin_analyzer import SIZE_TOLERANCE, BuiltinAnalyzer

# Faces per mesh invoke (eyes: twice that). An interpreter is kept per batch size, so batches are
# cut into powers of two (13 faces: 8 + 4 + 1): four interpreters per model at most.
MESH_BATCH = 8
# Mesh face-presence probability below which a detection is not a face (MediaPipe's tracking
# threshold); also ``refine``'s threshold, since the mesh is what refine runs.
PRESENCE = 0.5
# A second detection whose final box overlaps a kept one this much is the same face.
SAME_FACE_IOU = 0.5
# A box this many times a kept face's size that holds its nose tip is not a face of its own.
ENCLOSE_SCALE = 1.6


class MeshAnalyzer(BuiltinAnalyzer):
    name = "builtin_mesh"
    supports_landmarks = True
    supports_refine = True

    def __init__(self, threshold: float = bf.MIN_SCORE, min_face_size: int = 20, device: str = "cpu",
                 model_dir: str | Path | None = None, presence: float = PRESENCE, threads: int = 2,
                 iris: bool = True) -> None:
        super().__init__(threshold=threshold, min_face_size=min_face_size, device=device)
        self.model_dir = Path(model_dir) if model_dir is not None else mm.DEFAULT_DIR
        self.presence = float(presence)
        self.threads = int(threads)
        self.iris = bool(iris)
        mm.check(self.model_dir)       # fail at load, naming the files and the folder
        self.providers = {"blazeface": ["litert:cpu"], "face_mesh": ["litert:cpu"],
                          **({"iris": ["litert:cpu"]} if self.iris else {}),
                          "dlib_recognition": [f"torch:{device}"]}

    # -- detection ---------------------------------------------------------------------------
    def detect(self, images: Sequence[np.ndarray], min_face: float | None = None) -> list[list[Face]]:
        rgb = [as_rgb_uint8(im) for im in images]
        smallest = max(float(self.min_face_size), float(min_face or 0))
        self.skipped = [[] for _ in rgb]
        found = [self._blazeface(im, smallest) for im in rgb]
        owners = [(i, j) for i, (boxes, _, _) in enumerate(found) for j in range(len(boxes))]
        # pass 1 at MediaPipe's crop of the detection, pass 2 at the crop landmarks68 and refine
        # take for the face pass 1 placed (MediaPipe's tracking step)
        first = [fm.detection_matrix(found[i][0][j], found[i][1][j]) for i, j in owners]
        pts1, pres1 = self._mesh([rgb[i] for i, _ in owners], first, eyes=False)
        second = [fm.face_matrix(fm.face_box(p), fm.five_points(p)) for p in pts1]
        pts2, pres2 = self._mesh([rgb[i] for i, _ in owners], second, eyes=False)
        # a near-profile face can lose the mesh on the second crop (its box takes in the hidden
        # cheek's points): the first pass stands where the second does not see a face
        better = [b >= self.presence or b >= a for a, b in zip(pres1, pres2)]
        pts = [q if ok else p for p, q, ok in zip(pts1, pts2, better)]
        presence = [b if ok else a for a, b, ok in zip(pres1, pres2, better)]
        if self.iris:
            seen = [n for n, pr in enumerate(presence) if pr >= self.presence]
            for n, p in zip(seen, self._eyes([rgb[owners[n][0]] for n in seen], [pts[n] for n in seen])):
                pts[n] = p
        out: list[list[Face]] = [[] for _ in rgb]
        for (i, j), p, pr in zip(owners, pts, presence):
            score = float(found[i][2][j])
            face = Face(bbox=fm.face_box(p), kps=fm.five_points(p), score=score)
            size = float(max(face.bbox[2] - face.bbox[0], face.bbox[3] - face.bbox[1]))
            reason = None
            if pr < self.presence:
                reason = f"face mesh presence {pr:.3f} below {self.presence:g}"
            elif size < SIZE_TOLERANCE * self.min_face_size:
                reason = f"face {size:.0f} px tall, smaller than min_face_size {self.min_face_size}"
            elif any(_iou(face.bbox, kept.bbox) > SAME_FACE_IOU for kept in out[i]):
                continue                  # two detections the mesh placed on one face
            elif any(_encloses(face.bbox, kept) for kept in out[i]):
                # a weak detection spanning a group: the mesh finds "a face" in it (t1.jpg: a
                # 400 px box over two 110 px faces, presence 0.87), but a better face is inside
                reason = "box around a better-scored face"
            if reason:
                self.skipped[i].append({"bbox": [round(float(v), 1) for v in face.bbox],
                                        "score": round(score, 4), "reason": reason})
                continue
            out[i].append(face)
        for fs in out:
            fs.sort(key=lambda f: -f.score)
        return out

    def _blazeface(self, rgb: np.ndarray, min_face: float):
        """(boxes, keypoints (K, 6, 2), scores) in frame pixels, after weighted NMS over tiles."""
        h, w = rgb.shape[:2]
        boxes, kps, scores = [], [], []
        for win in bf.tiles(h, w, min_face):
            raw, logits = mm.run(mm.DETECTOR, bf.tile_input(rgb, *win)[None], self.model_dir, self.threads)
            b, k, s = bf.decode(raw[0], logits[0], self.threshold)
            b, k = bf.to_frame(b, k, win)
            keep = [n for n in range(len(s)) if not bf.cut_by_tile(b[n], win, h, w)]
            boxes.append(b[keep])
            kps.append(k[keep])
            scores.append(s[keep])
        return bf.weighted_nms(np.concatenate(boxes), np.concatenate(kps), np.concatenate(scores))

    def _mesh(self, images: Sequence[np.ndarray], matrices: Sequence[np.ndarray], eyes: bool = True,
              depth: bool = False):
        """(468-point meshes in image coordinates, presence probabilities), one per crop; with
        ``eyes`` (and the analyzer's ``iris``) the eyes refined by the iris model; with ``depth``
        each mesh has a third column, the model's depth in image pixels (smaller: nearer)."""
        if not matrices:
            return [], []
        crops = np.stack([fm.crop(im, m) for im, m in zip(images, matrices)])
        points, logits = [], []
        for s, e in _chunks(len(crops), MESH_BATCH):
            lm, pres = mm.run(mm.MESH, crops[s:e], self.model_dir, self.threads)
            points.append(lm.reshape(-1, 468, 3))
            logits.append(pres.reshape(-1))
        points, logits = np.concatenate(points), np.concatenate(logits)
        meshes = [fm.to_image(p, m) for p, m in zip(points, matrices)]
        if eyes and self.iris:
            meshes = self._eyes(images, meshes)
        if depth:
            meshes = [np.column_stack([q[:, :2], p[:, 2] * fm.image_scale(m)])
                      for q, p, m in zip(meshes, points, matrices)]
        return meshes, 1.0 / (1.0 + np.exp(-np.clip(logits.astype(np.float64), -100, 100)))

    def _eyes(self, images: Sequence[np.ndarray], meshes: list[np.ndarray]) -> list[np.ndarray]:
        """Each mesh with its eyes and brows replaced by the iris model's 71 points per eye."""
        if not meshes:
            return []
        mats = [fm.eye_matrices(p) for p in meshes]
        crops = np.stack([fm.eye_crop(im, m) for im, ms in zip(images, mats) for m in ms])
        contours = []
        for s, e in _chunks(len(crops), 2 * MESH_BATCH):
            c, _ = mm.run(mm.IRIS, crops[s:e], self.model_dir, self.threads)
            # this graph flattens a batch into one row: (1, N * 213), items in order
            contours.append(c.reshape(-1, 71, 3))
        contours = np.concatenate(contours)
        return [fm.apply_iris(p, contours[2 * n:2 * n + 2], ms) for n, (p, ms) in enumerate(zip(meshes, mats))]

    def _mesh_at(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]):
        """Meshes at each given face's box and five points (the crop of detect's second pass)."""
        owners = [(i, j) for i, fs in enumerate(faces) for j in range(len(fs))]
        rgb = {i: as_rgb_uint8(images[i]) for i in {i for i, _ in owners}}
        mats = [fm.face_matrix(faces[i][j].bbox, faces[i][j].kps) for i, j in owners]
        pts, presence = self._mesh([rgb[i] for i, _ in owners], mats)
        return owners, pts, presence

    def refine(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> list[list[Face | None]]:
        """The mesh alone at each face's box and five points (MediaPipe's tracking step, a few ms a
        face): a fresh box and five points, scored by the mesh's face presence; None below
        ``presence``."""
        out: list[list[Face | None]] = [[None] * len(fs) for fs in faces]
        for (i, j), p, pr in zip(*self._mesh_at(images, faces)):
            if pr >= self.presence:
                out[i][j] = Face(bbox=fm.face_box(p), kps=fm.five_points(p), score=float(pr))
        return out

    # -- landmarks ---------------------------------------------------------------------------
    def landmarks68(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> None:
        """dlib-layout 68 points from the mesh (``mesh68.INDEX``), no dlib predictor involved."""
        for (i, j), p, _ in zip(*self._mesh_at(images, faces)):
            faces[i][j].landmarks = mesh68.from_mesh(p)

    def meshes(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> list[list[np.ndarray]]:
        """The 468 mesh points (image x, y) of each given face."""
        out: list[list[np.ndarray]] = [[None] * len(fs) for fs in faces]
        for (i, j), p, _ in zip(*self._mesh_at(images, faces)):
            out[i][j] = p.astype(np.float32)
        return out

    def track(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
              depth: bool = False) -> list[list[tuple]]:
        """(468 mesh points, face presence) of each given face, the mesh run a second time at its
        own box and five points (detect's second pass): a face placed by another analyzer (MTCNN's
        box sits lower than the mesh's, with no forehead) gets the crop the mesh was fitted to. As
        in detect, the first pass stands where the second loses the face (a near-profile head).
        ``depth``: (468, 3) points, the third column the mesh's depth in image pixels."""
        owners = [(i, j) for i, fs in enumerate(faces) for j in range(len(fs))]
        rgb = [as_rgb_uint8(images[i]) for i, _ in owners]
        first = [fm.face_matrix(faces[i][j].bbox, faces[i][j].kps) for i, j in owners]
        pts1, pres1 = self._mesh(rgb, first, eyes=False, depth=True)
        second = [fm.face_matrix(fm.face_box(p), fm.five_points(p[:, :2])) for p in pts1]
        pts2, pres2 = self._mesh(rgb, second, eyes=False, depth=True)
        better = [b >= self.presence or b >= a for a, b in zip(pres1, pres2)]
        pts = [q if ok else p for p, q, ok in zip(pts1, pts2, better)]
        presence = [float(b if ok else a) for a, b, ok in zip(pres1, pres2, better)]
        if self.iris:
            seen = [n for n, pr in enumerate(presence) if pr >= self.presence]
            for n, p in zip(seen, self._eyes([rgb[n] for n in seen], [pts[n] for n in seen])):
                pts[n] = np.column_stack([p, pts[n][:, 2]])
        out: list[list[tuple]] = [[None] * len(fs) for fs in faces]
        for (i, j), p, pr in zip(owners, pts, presence):
            out[i][j] = (np.ascontiguousarray(np.asarray(p, np.float32)[:, :3 if depth else 2]), pr)
        return out

    def triangles(self) -> np.ndarray:
        return mm.triangles(self.model_dir)

    def model_files(self) -> list[tuple[str, str]]:
        recognition = ("dlib_recognition", str(bm.dlib_model_path("recognition")))
        return mm.model_files(self.model_dir, self.iris) + [recognition]


def _chunks(n: int, most: int) -> list[tuple[int, int]]:
    """(start, end) slices of n items, each a power of two long and at most ``most``."""
    out, start = [], 0
    while start < n:
        size = min(most, 1 << ((n - start).bit_length() - 1))
        out.append((start, start + size))
        start += size
    return out


def _encloses(box: np.ndarray, face: Face) -> bool:
    """True when ``box`` holds ``face``'s nose tip and is over ENCLOSE_SCALE times its size."""
    x, y = face.kps[2]
    size = lambda b: max(b[2] - b[0], b[3] - b[1])  # noqa: E731
    return bool(box[0] <= x <= box[2] and box[1] <= y <= box[3] and size(box) > ENCLOSE_SCALE * size(face.bbox))


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    x2, y2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0
