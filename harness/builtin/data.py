"""Built-in datasets (digits, CIFAR-10, synthetic) as in-memory tensors, and augmentation.

Each public function is a data ``_target_`` (conf/data/*.yaml) returning a ``Datasets``: the shape
the built-in loop reads. Loading draws no random numbers from a run's streams. Augmentation is
drawn per batch from the augment stream, so it is the same for every arm and on every device.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from harness import HarnessError

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


class DataError(ValueError, HarnessError):
    """The data cannot be loaded as configured."""


@dataclass
class Datasets:
    name: str
    train_x: torch.Tensor  # float32, N x C x H x W, normalised
    train_y: torch.Tensor  # int64
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    augment: bool = False  # the built-in loop's random crop + flip, drawn from the augment stream

    @property
    def in_channels(self) -> int:
        return self.train_x.shape[1]

    @property
    def image_size(self) -> int:
        return self.train_x.shape[-1]


_LOADED: dict = {}  # this process's datasets: a worker running many units reads each once


def _once(key: tuple, make) -> Datasets:
    """``make()``, made once per process for ``key``; a shallow copy each time, so that a run's
    limits and flags never reach the next run (the tensors are shared, never written in place)."""
    if key not in _LOADED:
        _LOADED[key] = make()
    return replace(_LOADED[key])


def _files_state(root: str) -> tuple:
    """(name, size, mtime) of every file under root: a cached CIFAR-10 is reread when its files change."""
    out = []
    for folder, _, names in os.walk(root):
        for n in sorted(names):
            st = os.stat(os.path.join(folder, n))
            out.append((os.path.join(folder, n), st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


def digits(augment: bool = False, train_limit: Optional[int] = None, test_limit: Optional[int] = None) -> Datasets:
    """scikit-learn's bundled 8x8 digits (1,797 images): 1,347 train / 450 test, a fixed split."""
    return _limit(_once(("digits",), _digits), augment, train_limit, test_limit)


def cifar10(root: str = "data/cifar10", download: bool = False, augment: bool = True, verify: bool = True,
            train_limit: Optional[int] = None, test_limit: Optional[int] = None) -> Datasets:
    """CIFAR-10 through torchvision.datasets.CIFAR10 from ``root`` (holding cifar-10-batches-py/).

    verify: check every file against the official md5 before anything is unpickled (a pickle can
    run code); false only for files you made yourself (the tests' tiny ones).
    """
    key = ("cifar10", os.path.abspath(root), download, verify, _files_state(root))
    return _limit(_once(key, lambda: _cifar10(root, download, verify)), augment, train_limit, test_limit)


def synthetic(num_train: int = 512, num_test: int = 256, num_classes: int = 10, channels: int = 1,
              image_size: int = 8, augment: bool = False, train_limit: Optional[int] = None,
              test_limit: Optional[int] = None) -> Datasets:
    """Class-dependent random images of any shape: no files needed (tests, benchmarks)."""
    for key, value, low in (("num_train", num_train, 1), ("num_test", num_test, 1), ("num_classes", num_classes, 2),
                            ("channels", channels, 1), ("image_size", image_size, 2)):
        if not isinstance(value, int) or value < low:
            raise DataError(f"data.{key}={value!r} must be an integer >= {low}.")
    shape = (num_train, num_test, num_classes, channels, image_size)
    return _limit(_once(("synthetic", *shape), lambda: _synthetic(*shape)), augment, train_limit, test_limit)


def _limit(ds: Datasets, augment: bool, train_limit, test_limit) -> Datasets:
    for key, value in (("train_limit", train_limit), ("test_limit", test_limit)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise DataError(f"data.{key}={value!r} must be null (all) or an integer >= 1.")
    ds.augment = bool(augment)
    if train_limit:
        ds.train_x, ds.train_y = ds.train_x[:train_limit], ds.train_y[:train_limit]
    if test_limit:
        ds.test_x, ds.test_y = ds.test_x[:test_limit], ds.test_y[:test_limit]
    return ds


def _digits() -> Datasets:
    """scikit-learn's bundled digits: 1,797 8x8 images, split 1,347/450 by a fixed permutation.

    The split does not depend on the experiment's seed: every seed is tested on the same images.
    """
    images, target = _digits_arrays()
    x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0
    x = (x - 0.5) / 0.5
    y = torch.tensor(target, dtype=torch.int64)
    order = torch.from_numpy(np.random.default_rng(0).permutation(len(y)))
    x, y = x[order], y[order]
    n_test = 450
    return Datasets("digits", x[n_test:], y[n_test:], x[:n_test], y[:n_test], 10)


def _digits_arrays() -> tuple:
    """(images (n, 8, 8), labels): scikit-learn's digits.csv.gz read as load_digits reads it, without
    importing scikit-learn (over a second a process, for every run and every worker)."""
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("sklearn")  # finds the package, imports nothing
    path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz" if spec and spec.origin else None
    if path is None or not path.is_file():  # another layout: ask scikit-learn itself
        from sklearn.datasets import load_digits

        bunch = load_digits()
        return bunch.images, bunch.target
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)


def _cifar10(root: str, download: bool, verify: bool = True) -> Datasets:
    import torchvision

    class CIFAR10(torchvision.datasets.CIFAR10):
        """torchvision's CIFAR10; with verify=False (data.verify=false) it trusts files that exist.

        With verify (the default) torchvision's own md5 check stands, and ``_verify_cifar10`` has
        already refused any file that does not match before this class unpickles anything.
        Downloads always go through torchvision's md5-checked path.
        """

        def _check_integrity(self) -> bool:
            if verify:
                return super()._check_integrity()
            folder = os.path.join(self.root, self.base_folder)
            files = [f for f, _ in self.train_list + self.test_list] + [self.meta["filename"]]
            return all(os.path.isfile(os.path.join(folder, f)) for f in files)

        def _load_meta(self) -> None:
            if verify:
                return super()._load_meta()
            path = os.path.join(self.root, self.base_folder, self.meta["filename"])
            with open(path, "rb") as infile:
                data = pickle.load(infile, encoding="latin1")
                self.classes = data[self.meta["key"]]
            self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

        def download(self) -> None:
            torchvision.datasets.CIFAR10.download(self)

    folder = os.path.join(root, CIFAR10.base_folder)
    if not download and not os.path.isdir(folder):
        raise DataError(
            f"data.root={root!r}: no CIFAR-10 files there (expected the folder {folder}/ with "
            "data_batch_1..5, test_batch and batches.meta in CIFAR's python pickle format). "
            "Put the extracted cifar-10-python.tar.gz there, point data.root at it, or set "
            "data.download=true to let torchvision download it."
        )
    if verify and os.path.isdir(folder):
        _verify_cifar10(root, folder, CIFAR10)
    try:
        train = CIFAR10(root, train=True, download=download)
        test = CIFAR10(root, train=False, download=download)
    except RuntimeError as e:
        raise DataError(f"data.root={root!r}: CIFAR-10 files are incomplete or unreadable: {e}") from e
    except (pickle.UnpicklingError, EOFError, ValueError, KeyError, OSError) as e:
        raise DataError(_damaged_cifar(root, folder, CIFAR10, e)) from e
    mean = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR10_STD).view(1, 3, 1, 1)

    def tensors(ds):
        x = torch.from_numpy(ds.data).permute(0, 3, 1, 2).float().div(255.0)
        return (x - mean) / std, torch.tensor(ds.targets, dtype=torch.int64)

    (train_x, train_y), (test_x, test_y) = tensors(train), tensors(test)
    return Datasets("cifar10", train_x, train_y, test_x, test_y, len(train.classes))


def _damaged_cifar(root: str, folder: str, cls, error: Exception) -> str:
    """A CIFAR-10 file that failed to load (data.verify=false: not md5-checked), named: found by
    loading each file as torchvision does, in its order (only on this error path)."""
    for name, md5 in [(cls.meta["filename"], cls.meta["md5"])] + cls.train_list + cls.test_list:
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                pickle.load(f, encoding="latin1")
        except Exception as e:  # whatever a damaged pickle raises: this is the file to name
            size = os.path.getsize(path) if os.path.isfile(path) else 0
            return (f"data.root={root!r}: {path} could not be loaded ({type(e).__name__}: {e}); it is "
                    f"damaged or truncated ({size} bytes; the official file's md5 is {md5}). data.verify="
                    "false skipped the md5 check that would have named it before loading: replace the file "
                    "with the official one (or set data.verify=true to check every file).")
    return f"data.root={root!r}: CIFAR-10 files could not be loaded ({type(error).__name__}: {error})."


def _verify_cifar10(root: str, folder: str, cls) -> None:
    """Refuse, before anything is unpickled, CIFAR-10 files that differ from the official ones.

    The md5s are torchvision's own list (``CIFAR10.train_list``, ``test_list``, ``meta``). A missing
    file is left to torchvision (it downloads with data.download=true, else says it is missing).
    """
    from torchvision.datasets.utils import calculate_md5

    bad = []
    for name, md5 in cls.train_list + cls.test_list + [(cls.meta["filename"], cls.meta["md5"])]:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            found = calculate_md5(path)
            if found != md5:
                bad.append(f"{path} (md5 {found}, expected {md5})")
    if bad:
        raise DataError(
            f"data.root={root!r}: {len(bad)} CIFAR-10 file(s) do not match the official checksums "
            f"(torchvision's md5 list): {'; '.join(bad)}. They were not loaded: a pickle can run code "
            "when it is loaded, so only the official files are unpickled. Replace them with the files "
            "of cifar-10-python.tar.gz (data.download=true fetches and checks them), or, for files you "
            "made yourself and trust (e.g. the tests' tiny copies), set data.verify=false; the results "
            "then record it and the report says so."
        )


def _synthetic(num_train: int, num_test: int, num_classes: int, channels: int, size: int) -> Datasets:
    """Each class is a fixed random template plus Gaussian noise: learnable, not trivial."""
    g = torch.Generator().manual_seed(1234)
    templates = torch.randn(num_classes, channels, size, size, generator=g)

    def draw(n):
        y = torch.randint(0, num_classes, (n,), generator=g)
        return templates[y] + 1.5 * torch.randn(n, channels, size, size, generator=g), y

    (train_x, train_y), (test_x, test_y) = draw(num_train), draw(num_test)
    return Datasets("synthetic", train_x, train_y, test_x, test_y, num_classes)


def augment(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Random translation (pad = size/8, zero fill) and horizontal flip, per example.

    The draws are made on the CPU from the augment stream, so they do not depend on the device, and
    travel in one copy (from pinned memory, not blocking the host, on CUDA) instead of three.
    """
    b, _, h, w = x.shape
    pad = max(1, h // 8)
    dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
    dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
    flip = torch.rand(b, generator=generator) < 0.5
    draws = torch.stack([dy, dx, flip.long()])
    if x.device.type == "cuda":
        draws = draws.pin_memory()
    dy, dx, flip = draws.to(x.device, non_blocking=True).unbind(0)
    flip = flip.bool()
    padded = F.pad(x, (pad, pad, pad, pad))
    rows = dy[:, None] + torch.arange(h, device=x.device)[None, :]
    cols = dx[:, None] + torch.arange(w, device=x.device)[None, :]
    cols = torch.where(flip[:, None], cols.flip(1), cols)
    batch = torch.arange(b, device=x.device)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()
