"""A real text corpus from what the pinned environment ships: the docstrings of one installed package.

Source. The package named by `training.corpus.package` (default pandas, pinned in pyproject.toml as
pandas==3.1.1): every `.py` file below its folder, by relative POSIX path, sorted, files under a folder named
`tests` left out (`max_files` keeps the first that many, for tests and the smoke preset). A file's text is the
docstrings of its module, classes and functions (`ast.get_docstring(node, clean=True)`, in `ast.walk` order)
joined by a blank line. pandas 3.1.1 gives 297 files, 251 with a docstring, 3.06 M characters of numpydoc
prose with examples (measured on Python 3.11).

Split, by file: a file is held out when the first 8 bytes of sha256(relative path), read as a fraction of
2^64, are below `heldout_fraction`. The rule reads nothing but the path, so adding a file moves no other file.

Tokenizer. Byte-level BPE from the `tokenizers` library (installed with transformers 5.24.0; its version is
recorded in the manifest), trained on the train files only, `vocab_size` entries: the separator SEP (id 0),
the 256 byte symbols, then the merges. Every file's ids are followed by SEP in the token arrays. At the byte
level nothing is unknown and every text decodes back to itself. The trainer is deterministic: trained twice in
two processes (tokenizers 0.23.3, the whole pandas train split, vocab 300, 512, 1024 and 4096) its JSON had
the same sha256 (tests/test_corpus.py repeats the check on a subset).

Pins. `training.corpus.version` must be the installed version of the package, and `training.corpus.sha256`,
when given, the sha256 of the extracted text (`text_sha256`); either mismatch refuses with one line that
names the key and both values, so a different environment never silently gives a different corpus.

Outputs (one folder, `{results}/corpus/`, OUTPUTS): train.npy and heldout.npy (the token ids, uint16),
tokenizer.json, and manifest.json: the package and its version, the tokenizers and Python versions, every file
with its sha256, split and characters, the text's and the tokenizer's sha256, the token counts. Built from the
whole of pandas 3.1.1 at vocab 512: 239 train and 58 held-out files, 2.73 M and 0.35 M characters, 1.39 M and
0.18 M tokens, in about 6 s (measured, 2 cores).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from ..io import atomic_path, atomic_write_json, atomic_write_text

SEP = "<|endoftext|>"  # ends every file in the token arrays (id 0)
OUTPUTS = {"train": "train.npy", "heldout": "heldout.npy", "tokenizer": "tokenizer.json", "manifest": "manifest.json"}
TOKEN_DTYPE = np.uint16  # ids of a vocabulary of at most 65,536 (the schema's limit)
KEY = "training.corpus"


class CorpusError(ValueError):
    """A corpus the config does not describe: one line that names the config key."""


def package_root(package: str) -> Path:
    """The folder of an installed package (the one Python imports)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(f"{KEY}.package: no installed package {package!r}")
    return Path(next(iter(spec.submodule_search_locations)))


def installed_version(package: str) -> str:
    """The installed version of the distribution that provides `package` (its metadata, no import)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        dists = metadata.packages_distributions().get(package, [])
        if not dists:
            raise CorpusError(f"{KEY}.package: no installed distribution provides {package!r}") from None
        return metadata.version(dists[0])


def source_files(root: Path, max_files: int | None = None) -> list[str]:
    """Relative POSIX paths of the package's modules, sorted, without `tests` folders (the first max_files)."""
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    paths = [p for p in paths if "tests" not in p.split("/")[:-1]]
    return paths if max_files is None else paths[:max_files]


def docstrings(source: bytes) -> str:
    """The docstrings of a module and its classes and functions (clean=True, ast.walk order), blank-line joined."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docs = (ast.get_docstring(node, clean=True) for node in ast.walk(ast.parse(source)) if isinstance(node, kinds))
    return "\n\n".join(d for d in docs if d)


def split_of(path: str, heldout_fraction: float) -> str:
    """'heldout' when the first 8 bytes of sha256(path) / 2^64 < heldout_fraction, else 'train'."""
    u = int.from_bytes(hashlib.sha256(path.encode()).digest()[:8], "big") / 2**64
    return "heldout" if u < heldout_fraction else "train"


def text_sha256(texts: list[tuple[str, str]]) -> str:
    """sha256 over `path NUL text NUL` (UTF-8) of every (path, text), in order: the extracted text's hash."""
    h = hashlib.sha256()
    for path, text in texts:
        h.update(path.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE tokenizer (tokenizers) of `vocab_size` entries trained on `texts`: SEP, 256 bytes, merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[SEP], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )  # fmt: skip
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def encode(tokenizer, texts: list[str]) -> np.ndarray:
    """The ids of `texts` side by side, each text followed by SEP, as TOKEN_DTYPE."""
    sep = tokenizer.token_to_id(SEP)
    ids = [i for enc in tokenizer.encode_batch(texts) for i in (*enc.ids, sep)]
    return np.asarray(ids, dtype=TOKEN_DTYPE)


def check_version(cfg: dict) -> str:
    """The installed version of the package, refused when it is not the config's `version`."""
    package, pinned = cfg["package"], str(cfg["version"])
    found = installed_version(package)
    if found != pinned:
        raise CorpusError(f"{KEY}.version: the config pins {package} {pinned}, the installed {package} is {found}")
    return found


def check_text(cfg: dict, version: str, digest: str) -> None:
    """Refuse a text whose sha256 is not the config's `sha256` (when the config gives one)."""
    pinned = cfg.get("sha256")
    if pinned is not None and pinned != digest:
        raise CorpusError(f"{KEY}.sha256: the config pins the text hash {pinned}, "
                          f"the installed {cfg['package']} {version} gives {digest}")  # fmt: skip


def extract(cfg: dict) -> tuple[str, list[dict], list[tuple[str, str]]]:
    """(installed version, file rows, (path, text) pairs) of the corpus the config describes, pins checked."""
    version = check_version(cfg)
    root = package_root(cfg["package"])
    rows, texts = [], []
    for path in source_files(root, cfg.get("max_files")):
        source = (root / path).read_bytes()
        text = docstrings(source)
        split = split_of(path, cfg["heldout_fraction"])
        rows.append({"path": path, "sha256": hashlib.sha256(source).hexdigest(), "split": split, "chars": len(text)})
        texts.append((path, text))
    check_text(cfg, version, text_sha256(texts))
    for split in ("train", "heldout"):
        if not any(r["split"] == split and r["chars"] for r in rows):
            raise CorpusError(f"{KEY}.heldout_fraction: {cfg['heldout_fraction']} leaves no {split} file with text "
                              f"among the {len(rows)} files")  # fmt: skip
    return version, rows, texts


@dataclass
class Corpus:
    """A built corpus: the token arrays, the tokenizer's JSON and the manifest."""

    train: np.ndarray  # (N_train,) TOKEN_DTYPE
    heldout: np.ndarray  # (N_heldout,)
    tokenizer: str  # the tokenizer's JSON (tokenizers' to_str)
    manifest: dict


def build(cfg: dict) -> Corpus:
    """The corpus of the config section `training.corpus` (module docstring): extract, split, tokenise."""
    import tokenizers

    version, rows, texts = extract(cfg)
    split = {r["path"]: r["split"] for r in rows}
    parts = {s: [t for p, t in texts if split[p] == s and t] for s in ("train", "heldout")}
    tokenizer = train_tokenizer(parts["train"], cfg["vocab_size"])
    arrays = {s: encode(tokenizer, parts[s]) for s in parts}
    blob = tokenizer.to_str()
    manifest = {
        "package": cfg["package"], "version": version, "tokenizers": tokenizers.__version__,
        "python": platform.python_version(),
        "source": "docstrings (ast.get_docstring, clean=True) of every module, class and function",
        "max_files": cfg.get("max_files"), "heldout_fraction": cfg["heldout_fraction"],
        "vocab_size": tokenizer.get_vocab_size(), "vocab_size_asked": cfg["vocab_size"], "sep_id": 0,
        "dtype": np.dtype(TOKEN_DTYPE).name, "text_sha256": text_sha256(texts),
        "tokenizer_sha256": hashlib.sha256(blob.encode()).hexdigest(),
        "files": rows, "n_files": {s: sum(r["split"] == s for r in rows) for s in parts},
        "chars": {s: sum(len(t) for t in parts[s]) for s in parts},
        "tokens": {s: len(a) for s, a in arrays.items()},
    }  # fmt: skip
    return Corpus(arrays["train"], arrays["heldout"], blob, manifest)


def write(corpus: Corpus, paths: dict) -> None:
    """Each output atomically: paths has the keys of OUTPUTS (the manifest last, so it marks a finished build)."""
    for split in ("train", "heldout"):
        with atomic_path(paths[split]) as tmp, open(tmp, "wb") as f:
            np.save(f, getattr(corpus, split))
    atomic_write_text(paths["tokenizer"], corpus.tokenizer)
    atomic_write_json(paths["manifest"], corpus.manifest)


@dataclass(frozen=True)
class Tokens:
    """A built corpus as a task reads it: the token ids (int64) of both splits and the vocabulary size."""

    train: np.ndarray  # (N_train,) int64
    heldout: np.ndarray  # (N_heldout,) int64
    vocab_size: int


def load(folder: str | os.PathLike) -> Tokens:
    """The token arrays of the corpus built in `folder`, read once per process (and again after a rebuild)."""
    manifest = Path(folder) / OUTPUTS["manifest"]
    if not manifest.is_file():
        raise CorpusError(f"RunConfig.corpus: no built corpus in {os.fspath(folder)!r} (snakemake corpus builds it)")
    return _load(str(Path(folder).resolve()), manifest.stat().st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _load(folder: str, _mtime_ns: int) -> Tokens:
    vocab = json.loads((Path(folder) / OUTPUTS["manifest"]).read_text())["vocab_size"]
    train, heldout = (np.load(Path(folder) / OUTPUTS[s]).astype(np.int64) for s in ("train", "heldout"))
    return Tokens(train, heldout, int(vocab))
