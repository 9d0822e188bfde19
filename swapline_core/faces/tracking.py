"""Cross-frame reuse: follow selected faces through a clip instead of re-detecting every frame.

The detector (and embedder) run on every ``detect_every``-th frame as one batch per chunk; in
between, each track's keypoints are carried by pyramidal Lucas-Kanade optical flow with a
forward-backward check. A track whose flow fails, or that goes unmatched on a detection frame,
is "weak": the detector runs on the next frame. A track that misses detections keeps its last
good geometry for up to ``max_missing`` frames, so a single missed detection never flickers
back to the original face. Keypoints are smoothed with a One-Euro filter (jitter removed when
still, little lag when moving).

Three events are handled at once instead of by waiting (issues 13.7, 18.3):
- a shot cut (frame indices from ``video.cuts``): every track, filter and flow state is dropped
  and the detector runs on the cut frame, so nothing drags across shots;
- a face that leaves: a track whose box is mostly outside the frame, or whose 24x24 luma patch
  no longer correlates with the patch at its last detection (NCC < :data:`APPEAR_MIN`), ends on
  that frame. Measured on the sample clips: the same face 7 frames later at the old box scores
  0.57-0.95; a box shifted by 60 px onto background scores -0.14..0.07 (a blurred copy of the
  face still scores ~0.6: it is still a face-shaped thing there). A detector miss with the
  face still in place keeps holding the track as before;
- a face that enters between detector frames: when a detection starts a new track, the frames
  since the previous detector frame (kept in a small buffer, at most :data:`MAX_BACKFILL`) are
  detected as one batch and the face is added backwards, frame by frame, while a detection
  overlaps it, so it is swapped from the first frame the detector can see it. Frames that lie
  in an earlier chunk are reported in :attr:`FaceTracker.backfilled` (clip index -> faces) for
  the caller to merge, so finished chunks are never rewritten.
"""
from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np

from ..types import Face
from .select import similarities

APPEAR_MIN = 0.3      # patch NCC below which the tracked box no longer shows the face (docstring)
MIN_VISIBLE = 0.5     # share of the box inside the frame below which the face has left
MAX_BACKFILL = 16     # frames kept for backfill (bounds memory: 16 frames of 1080p ~ 100 MB)
PATCH = 24


def _patch(gray: np.ndarray, bbox: np.ndarray) -> np.ndarray | None:
    """The box's luma resampled to PATCHxPATCH uint8 (None when the box misses the frame)."""
    h, w = gray.shape
    x1, y1, x2, y2 = (int(round(float(v))) for v in bbox)
    x1, y1, x2, y2 = max(0, x1), max(0, y1), min(w, x2), min(h, y2)
    if x2 - x1 < 2 or y2 - y1 < 2:
        return None
    return cv2.resize(gray[y1:y2, x1:x2], (PATCH, PATCH), interpolation=cv2.INTER_AREA)


def ncc(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float32) - float(a.mean())
    b = b.astype(np.float32) - float(b.mean())
    den = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den > 1e-3 else 0.0


def visible_share(bbox: np.ndarray, width: int, height: int) -> float:
    x1, y1, x2, y2 = (float(v) for v in bbox)
    area = max(x2 - x1, 1e-3) * max(y2 - y1, 1e-3)
    inside = max(0.0, min(x2, width) - max(x1, 0.0)) * max(0.0, min(y2, height) - max(y1, 0.0))
    return inside / area


class OneEuro:
    """One-Euro filter (Casiez et al. 2012): an adaptive low-pass, one sample per frame.

    Cut-offs are in Hz at the clip's frame rate; speed is measured in face sizes per second so
    one setting behaves the same at any resolution.
    """

    def __init__(self, min_cutoff: float = 1.0, beta: float = 2.0, d_cutoff: float = 1.0, fps: float = 30.0):
        self.min_cutoff, self.beta, self.d_cutoff, self.fps = min_cutoff, beta, d_cutoff, fps
        self.x = self.dx = None

    def _alpha(self, cutoff: float) -> float:
        tau = 1.0 / (2 * math.pi * cutoff)
        return 1.0 / (1.0 + tau * self.fps)

    def __call__(self, x: np.ndarray, scale: float = 1.0) -> np.ndarray:
        if self.x is None:
            self.x, self.dx = x.copy(), np.zeros_like(x)
            return x
        a_d = self._alpha(self.d_cutoff)
        self.dx = a_d * (x - self.x) * self.fps + (1 - a_d) * self.dx
        speed = float(np.abs(self.dx).mean()) / max(scale, 1e-6)
        a = self._alpha(self.min_cutoff + self.beta * speed)
        self.x = a * x + (1 - a) * self.x
        return self.x


def iou(a: np.ndarray, b: np.ndarray) -> float:
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    x2, y2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


@dataclass
class Track:
    id: int
    face: Face                 # last raw geometry (unsmoothed)
    missed: int = 0
    weak: bool = False
    filt: OneEuro = field(default_factory=OneEuro)
    ref: np.ndarray | None = None   # luma patch at the last detection (appearance check)


@dataclass
class TrackerStats:
    frames: int = 0
    detector_frames: int = 0
    flow_frames: int = 0
    held_frames: int = 0       # frames where a live track kept its geometry without detection
    cuts: int = 0              # shot cuts where every track was reset
    ended_left: int = 0        # tracks ended because the face left (appearance / out of frame)
    backfilled: int = 0        # faces added to frames before the detection that found them
    backfill_detector_frames: int = 0
    detect_s: float = 0.0
    embed_s: float = 0.0
    flow_s: float = 0.0

    def to_json(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


class FaceTracker:
    def __init__(self, analyzer, mode: str = "identity", reference: np.ndarray | None = None,
                 threshold: float = 0.35, max_faces: int = 1, detect_every: int = 8,
                 max_missing: int = 12, smoothing: float = 0.5, iou_match: float = 0.3, fps: float = 30.0):
        if mode == "identity" and reference is None:
            raise ValueError("identity tracking needs a reference face model")
        self.analyzer, self.mode, self.reference = analyzer, mode, reference
        self.threshold, self.max_faces = threshold, max_faces
        self.detect_every, self.max_missing, self.iou_match = max(1, detect_every), max_missing, iou_match
        # smoothing 0 -> raw keypoints; 1 -> heavy (cut-off from 8 Hz down to 0.3 Hz, log scale)
        self.min_cutoff = 8.0 * (0.3 / 8.0) ** float(np.clip(smoothing, 0, 1))
        self.fps = fps
        self.smoothing = smoothing
        self.tracks: list[Track] = []
        self.next_id = 0
        self.prev_gray: np.ndarray | None = None
        self.t = 0
        self.redetect = False      # a track just ended: look again on the next frame
        # (clip index, frame, faces emitted there) for frames since the last detector frame
        self.buffer: deque = deque(maxlen=min(self.detect_every, MAX_BACKFILL))
        self.backfilled: dict[int, list[Face]] = {}
        self.stats = TrackerStats()

    # -- detection + selection ---------------------------------------------------------------
    def _detect(self, frames: Sequence[np.ndarray]) -> list[list[Face]]:
        t0 = time.perf_counter()
        found = self.analyzer.detect(frames)
        self.stats.detect_s += time.perf_counter() - t0
        if self.mode == "identity":
            t0 = time.perf_counter()
            self.analyzer.embed(frames, found)
            self.stats.embed_s += time.perf_counter() - t0
        self.stats.detector_frames += len(frames)
        return [self._select(fs) for fs in found]

    def _select(self, faces: list[Face]) -> list[Face]:
        if self.mode == "identity":
            sims = similarities(faces, self.reference)
            keep = sorted((i for i, s in enumerate(sims) if s is not None and s >= self.threshold),
                          key=lambda i: -sims[i])
        elif self.mode == "largest":
            keep = sorted(range(len(faces)), key=lambda i: -faces[i].area)
        else:
            keep = list(range(len(faces)))
        if self.max_faces > 0:
            keep = keep[: self.max_faces]
        chosen = []
        for i in keep:
            f = faces[i].copy(embedding=None)  # embeddings are not needed downstream: keep memory flat
            chosen.append(f)
        return chosen

    def _match(self, detections: list[Face], gray: np.ndarray) -> list[Track]:
        """Assign detections to tracks; returns the tracks this frame started."""
        unmatched = list(range(len(detections)))
        gone = []
        for tr in self.tracks:
            best, best_iou = None, self.iou_match
            for j in unmatched:
                v = iou(tr.face.bbox, detections[j].bbox)
                if v > best_iou:
                    best, best_iou = j, v
            if best is None:
                tr.missed += 1
                tr.weak = True
                if self._left(tr, gray):   # not a detector miss: the face is no longer there
                    gone.append(tr)
            else:
                tr.face, tr.missed, tr.weak = detections[best], 0, False
                tr.ref = _patch(gray, tr.face.bbox)
                unmatched.remove(best)
        self._end(gone)
        new = []
        for j in unmatched:
            if self.max_faces <= 0 or len(self.tracks) < self.max_faces:
                tr = Track(self.next_id, detections[j], filt=OneEuro(self.min_cutoff, fps=self.fps),
                           ref=_patch(gray, detections[j].bbox))
                self.tracks.append(tr)
                new.append(tr)
                self.next_id += 1
        self.tracks = [t for t in self.tracks if t.missed <= self.max_missing]
        return [t for t in new if t in self.tracks]

    # -- track end ---------------------------------------------------------------------------
    def _left(self, tr: Track, gray: np.ndarray) -> bool:
        h, w = gray.shape
        if visible_share(tr.face.bbox, w, h) < MIN_VISIBLE:
            return True
        if tr.ref is None:
            return False
        now = _patch(gray, tr.face.bbox)
        return now is None or ncc(now, tr.ref) < APPEAR_MIN

    def _end(self, gone: list[Track]) -> None:
        if gone:
            self.tracks = [t for t in self.tracks if t not in gone]
            self.stats.ended_left += len(gone)
            self.redetect = True

    # -- backfill ----------------------------------------------------------------------------
    def _backfill(self, new: list[Track], start: int) -> None:
        """Add each new track's face to the buffered frames before it, newest first, while a
        detection there overlaps it (the face entered between detector frames)."""
        window = list(self.buffer)
        if not window or not new:
            return
        found = self._detect([f for _, f, _ in window])
        self.stats.backfill_detector_frames += len(window)
        for tr in new:
            cur = tr.face
            for (j, _, faces_j), cands in zip(reversed(window), reversed(found)):
                best = max(cands, key=lambda c: iou(c.bbox, cur.bbox), default=None)
                if best is None or iou(best.bbox, cur.bbox) <= self.iou_match:
                    break
                if any(iou(best.bbox, f.bbox) > self.iou_match for f in faces_j):
                    break        # that spot already holds a tracked face
                face = best.copy(track_id=tr.id, landmarks=None)
                faces_j.append(face)       # for frames of this chunk this is the output list itself
                if j < start:
                    self.backfilled.setdefault(j, []).append(face)
                self.stats.backfilled += 1
                cur = best

    # -- optical flow ------------------------------------------------------------------------
    def _flow(self, gray: np.ndarray) -> None:
        t0 = time.perf_counter()
        gone = []
        for tr in self.tracks:
            f = tr.face
            pts = np.vstack([f.kps, f.bbox.reshape(2, 2)]).astype(np.float32).reshape(-1, 1, 2)
            size = max(float(f.bbox[2] - f.bbox[0]), 8.0)
            win = int(np.clip(size / 6, 9, 41)) | 1
            nxt, st, _ = cv2.calcOpticalFlowPyrLK(self.prev_gray, gray, pts, None, winSize=(win, win), maxLevel=3)
            back, st2, _ = cv2.calcOpticalFlowPyrLK(gray, self.prev_gray, nxt, None, winSize=(win, win), maxLevel=3)
            fb = np.linalg.norm((back - pts).reshape(-1, 2)[:5], axis=1)
            ok = st[:5].all() and st2[:5].all() and float(np.median(fb)) < 0.05 * size
            if ok:
                moved = nxt.reshape(-1, 2)
                shift = (moved[:5] - f.kps).mean(axis=0)
                tr.face = f.copy(kps=moved[:5].astype(np.float32), bbox=(f.bbox + np.tile(shift, 2)).astype(np.float32))
            else:
                tr.weak = True
                tr.missed += 1
            # Flow can follow the background after the face went (it is static and textured
            # there): the appearance check ends the track instead of holding it on background.
            if self._left(tr, gray):
                gone.append(tr)
        self._end(gone)
        self.stats.flow_s += time.perf_counter() - t0

    # -- resumable state ---------------------------------------------------------------------
    def state(self) -> dict:
        """Everything that carries into the next chunk, so a resumed run equals an uninterrupted one.

        ``buffer_from`` is the clip index of the first buffered frame: :meth:`restore` needs the
        frames (and faces) from there up to ``t``.
        """
        return {"t": self.t, "next_id": self.next_id, "redetect": self.redetect,
                "buffer_from": self.buffer[0][0] if self.buffer else self.t, "tracks": [
                    {"id": tr.id, "missed": tr.missed, "weak": tr.weak, "bbox": tr.face.bbox.tolist(),
                     "kps": tr.face.kps.tolist(), "score": tr.face.score,
                     "ref": None if tr.ref is None else tr.ref.ravel().tolist(),
                     "filt": None if tr.filt.x is None else [tr.filt.x.tolist(), tr.filt.dx.tolist()]}
                    for tr in self.tracks]}

    def restore(self, state: dict, prev_frame: np.ndarray | None,
                buffered: Sequence[tuple[np.ndarray, list[Face]]] = ()) -> None:
        """``buffered``: (frame, faces) for clip indices ``state["buffer_from"]`` .. ``t - 1``."""
        self.t, self.next_id = state["t"], state["next_id"]
        self.redetect = bool(state.get("redetect", False))
        self.tracks = []
        for d in state["tracks"]:
            filt = OneEuro(self.min_cutoff, fps=self.fps)
            if d["filt"] is not None:
                filt.x, filt.dx = (np.array(v, np.float32) for v in d["filt"])
            face = Face(bbox=np.array(d["bbox"], np.float32), kps=np.array(d["kps"], np.float32), score=d["score"])
            ref = None if d.get("ref") is None else np.array(d["ref"], np.uint8).reshape(PATCH, PATCH)
            self.tracks.append(Track(d["id"], face, d["missed"], d["weak"], filt, ref))
        self.prev_gray = None if prev_frame is None else cv2.cvtColor(prev_frame, cv2.COLOR_RGB2GRAY)
        first = state.get("buffer_from", self.t)
        self.buffer.clear()
        for k, (frame, faces) in enumerate(buffered):
            self.buffer.append((first + k, frame, list(faces)))

    def _reset(self) -> None:
        """A shot cut: nothing of the previous shot carries over."""
        self.tracks = []
        self.prev_gray = None
        self.buffer.clear()
        self.redetect = False
        self.stats.cuts += 1

    # -- per chunk ---------------------------------------------------------------------------
    def process(self, frames: Sequence[np.ndarray], cuts: Sequence[int] = ()) -> list[list[Face]]:
        """Selected, tracked, smoothed faces for each frame of the chunk, in order.

        ``cuts``: chunk-local indices of frames that start a new shot. Faces found late for
        frames of earlier chunks are left in :attr:`backfilled` (reset on every call).
        """
        start = self.t
        cuts = set(cuts)
        self.backfilled = {}
        # Earlier chunks' lists were handed out already: backfill them through ``backfilled``.
        self.buffer = deque(((j, f, list(fs)) for j, f, fs in self.buffer), maxlen=self.buffer.maxlen)
        planned = [k for k in range(len(frames)) if (self.t + k) % self.detect_every == 0 or k in cuts]
        detections = dict(zip(planned, self._detect([frames[k] for k in planned]))) if planned else {}
        out: list[list[Face]] = []
        for k, frame in enumerate(frames):
            gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
            if k in cuts:
                self._reset()
            if k not in detections and self.prev_gray is not None and self.tracks:
                self._flow(gray)
                self.stats.flow_frames += 1
            if k not in detections and (self.redetect or any(t.weak for t in self.tracks)
                                        or not self.tracks and self.t % max(1, self.detect_every // 2) == 0):
                detections[k] = self._detect([frame])[0]   # a weak or ended track: look again now
            if k in detections:
                self.redetect = False
                self._backfill(self._match(detections[k], gray), start)
                self.buffer.clear()
                if any(t.missed for t in self.tracks):
                    self.stats.held_frames += 1
            out.append(self._emit())
            if k not in detections:
                self.buffer.append((self.t, frame, out[-1]))
            self.prev_gray = gray
            self.t += 1
            self.stats.frames += 1
        return out

    def _emit(self) -> list[Face]:
        faces = []
        for tr in self.tracks:
            f = tr.face
            scale = max(float(f.bbox[2] - f.bbox[0]), 1.0)
            packed = np.concatenate([f.kps.reshape(-1), f.bbox])
            sm = tr.filt(packed, scale) if self.smoothing > 0 else packed
            faces.append(f.copy(kps=sm[:10].reshape(5, 2).astype(np.float32), bbox=sm[10:].astype(np.float32),
                                track_id=tr.id, landmarks=None))
        return faces
