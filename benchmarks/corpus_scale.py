"""`course pretrain --corpus` at 20, 100 and 400 MB of text: peak memory, time to the first step,
the second run that reuses the token store, and encoding throughput against `datasets`.

Issue #40's done-when targets: peak RSS under 2 GB at every size, a second run (same
`--store-dir`) at its first optimizer step in under 30 s, encoding on 2 cores within 1.5x of
`datasets` + `tokenizers` on the same text.

Corpora: JSONL, one document per line (`{"text": ...}`), each the text of one real local file
(.py/.md/.rst/.txt under the venv's site-packages and /usr/lib/python3*, UTF-8, deduplicated
by content), in a seeded order; a corpus larger than the distinct text repeats it, each pass in
another seeded order (the results file says how much is repeated). They are written under
`--scratch` (default /tmp/corpus_scale), never into the repository.

For each size two runs of `course pretrain --corpus X --steps 5 --threads 1 --no-progress`
(the CLI's own `main`, started as `python -c` with a hook that prints a timestamp when the
first optimizer step returns): a fresh one (new --output-dir, empty --store-dir) and a second
one (new --output-dir, the same --store-dir). Peak RSS: `wait4`'s ru_maxrss of the process,
checked against the process tree's VmRSS polled every 0.1 s. Encoding (`--encode-sizes`):
`build_store` on every document against `datasets.load_dataset("json")` +
`map(batched=True, num_proc=2)` producing ids and word ids per sentence with the same
sentence split and the same trained tokenizer, each in its own process; skipped with one
line when `datasets` is not installed.

    python benchmarks/corpus_scale.py                       # 20, 100, 400 MB; encoding at 20, 100
    python benchmarks/corpus_scale.py --sizes 20 --encode-sizes 20

Writes benchmarks/results/issue40/corpus_scale.json (rows of earlier sizes are kept: run the
sizes one at a time) and prints a table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import RESULTS_DIR, provenance, write_results  # noqa: E402

SUFFIXES = (".py", ".md", ".rst", ".txt")
# Files larger than this are mostly data tables, not text anyone would train on.
MAX_FILE_BYTES = 2_000_000
MIN_FILE_BYTES = 200
RESULTS_NAME = "corpus_scale"

# `course pretrain`'s own entry point, with a timestamp when the first optimizer step returns.
HOOK = """
import sys, time
from course_lib.training import engine
_step = engine.Trainer._optimizer_step
def _timed(self):
    out = _step(self)
    if not getattr(self, "_corpus_scale_marked", False):
        self._corpus_scale_marked = True
        print(f"corpus_scale: first step done {time.time():.3f}", file=sys.stderr, flush=True)
    return out
engine.Trainer._optimizer_step = _timed
from course_lib.training.cli import main
sys.exit(main(sys.argv[1:]))
"""

# build_store on every document of a corpus, with the run's tokenizer.
OURS = """
import json, sys, time
from course_lib.data.corpus import StreamCorpus
from course_lib.data.token_store import build_store
from course_lib.tokenization import CourseTokenizer
corpus, tokenizer_path, family, out = sys.argv[1:5]
tokenizer = CourseTokenizer.load(tokenizer_path, family)
began = time.perf_counter()
build_store(out, StreamCorpus(corpus).iter_all(), tokenizer)
seconds = time.perf_counter() - began
meta = json.load(open(out + "/meta.json"))
print(json.dumps({"seconds": seconds, "n_tokens": meta["n_tokens"],
                  "n_documents": meta["n_documents"], "n_sentences": meta["n_sentences"]}))
"""

# datasets + tokenizers: the same documents, sentence split and tokenizer, ids per sentence.
DATASETS = """
import json, sys, time
from datasets import load_dataset
from course_lib.data.corpus import document_from_text
from course_lib.tokenization import CourseTokenizer
corpus, tokenizer_path, family, cache, workers = sys.argv[1:6]
backend = CourseTokenizer.load(tokenizer_path, family).backend

def encode(batch):
    flat = []
    for text in batch["text"]:
        sentences = document_from_text("", text).sentences
        flat.extend(" " + s if i else s for i, s in enumerate(sentences))
    ids, words = [], []
    for e in backend.encode_batch(flat, add_special_tokens=False):
        if e.ids:
            ids.append(e.ids)
            words.append([-1 if w is None else w for w in e.word_ids])
    return {"input_ids": ids, "word_ids": words}

began = time.perf_counter()
ds = load_dataset("json", data_files=corpus, split="train", cache_dir=cache)
loaded = time.perf_counter()
out = ds.map(encode, batched=True, batch_size=1000, num_proc=int(workers),
             remove_columns=ds.column_names)
done = time.perf_counter()
n_tokens = sum(len(x) for b in out.iter(batch_size=10000) for x in b["input_ids"])
print(json.dumps({"seconds": done - began, "load_seconds": loaded - began,
                  "map_seconds": done - loaded, "n_tokens": n_tokens, "n_sentences": len(out)}))
"""


def parse_args() -> argparse.Namespace:
    """The benchmark's flags (sizes in MB of text)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="20,100,400", help="corpus sizes, MB of text")
    p.add_argument("--encode-sizes", default="20,100", help="sizes of the datasets comparison")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="course pretrain --threads")
    p.add_argument("--workers", type=int, default=2, help="datasets map num_proc")
    p.add_argument("--seed", type=int, default=0, help="order of the documents")
    p.add_argument("--scratch", type=Path, default=Path("/tmp/corpus_scale"))
    p.add_argument("--no-runs", action="store_true", help="only the encoding comparison")
    p.add_argument("--no-encode", action="store_true", help="only the course pretrain runs")
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "issue40")
    return p.parse_args()


# ----- corpora ------------------------------------------------------------------------------


def text_roots() -> list[Path]:
    """Where the real text comes from: the venv's site-packages and the system's Python."""
    import sysconfig

    roots = [Path(sysconfig.get_paths()["purelib"])]
    roots += sorted(p for p in Path("/usr/lib").glob("python3*") if p.is_dir())
    return roots


def text_pool(roots: list[Path]) -> tuple[list[Path], int]:
    """Every distinct (by content) UTF-8 text file under `roots`, sorted, and their bytes."""
    seen: set[bytes] = set()
    files, total = [], 0
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix not in SUFFIXES or path.is_symlink() or not path.is_file():
                continue
            size = path.stat().st_size
            if not MIN_FILE_BYTES <= size <= MAX_FILE_BYTES:
                continue
            raw = path.read_bytes()
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            digest = hashlib.sha1(raw).digest()
            if digest in seen:
                continue
            seen.add(digest)
            files.append(path)
            total += size
    return files, total


def build_corpus(path: Path, mb: int, pool: list[Path], pool_bytes: int, seed: int) -> dict:
    """A JSONL corpus of `mb` MB of text (UTF-8 bytes of the "text" fields), written under a
    temporary name; pass k walks the pool in the order of Random(seed + k)."""
    target = mb * 1_000_000
    done, docs, passes = 0, 0, 0
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        while done < target:
            order = list(pool)
            random.Random(seed + passes).shuffle(order)
            passes += 1
            for file in order:
                text = file.read_text(encoding="utf-8")
                out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                done += len(text.encode("utf-8"))
                docs += 1
                if done >= target:
                    break
    tmp.replace(path)
    return {
        "path": str(path),
        "text_mb": round(done / 1e6, 2),
        "file_mb": round(path.stat().st_size / 1e6, 2),
        "documents": docs,
        "passes_over_pool": passes,
        "repeated_text_mb": round(max(0, done - pool_bytes) / 1e6, 2),
    }


def corpora(sizes: list[int], scratch: Path, seed: int) -> tuple[dict[int, dict], dict]:
    """Build (or reuse, same pool and seed) the corpus of every size."""
    scratch.mkdir(parents=True, exist_ok=True)
    roots = text_roots()
    began = time.perf_counter()
    pool, pool_bytes = text_pool(roots)
    key = hashlib.sha256(("\n".join(map(str, pool)) + f"|{pool_bytes}|{seed}").encode())
    pool_info = {
        "roots": [str(r) for r in roots],
        "suffixes": list(SUFFIXES),
        "file_bytes": [MIN_FILE_BYTES, MAX_FILE_BYTES],
        "distinct_files": len(pool),
        "distinct_text_mb": round(pool_bytes / 1e6, 2),
        "seed": seed,
        "key": key.hexdigest()[:16],
    }
    print(
        f"text pool: {len(pool):,} distinct files, {pool_bytes / 1e6:.1f} MB "
        f"({time.perf_counter() - began:.0f} s)",
        flush=True,
    )
    out = {}
    for mb in sizes:
        path = scratch / f"corpus-{mb}MB.jsonl"
        manifest = path.with_suffix(".json")
        if path.is_file() and manifest.is_file():
            info = json.loads(manifest.read_text())
            if info.get("pool_key") == pool_info["key"]:
                out[mb] = info
                continue
        began = time.perf_counter()
        info = build_corpus(path, mb, pool, pool_bytes, seed)
        info["pool_key"] = pool_info["key"]
        manifest.write_text(json.dumps(info, indent=1) + "\n")
        print(
            f"built {path} ({info['text_mb']} MB of text, {info['documents']:,} documents, "
            f"{time.perf_counter() - began:.0f} s)",
            flush=True,
        )
        out[mb] = info
    return out, pool_info


# ----- measuring a process ------------------------------------------------------------------


def _tree_memory(root: int) -> tuple[int, int]:
    """Resident bytes of `root` and all its descendants (from /proc): the sum of their RSS
    (pages forked workers share counted once per process) and of their PSS (shared pages split
    between the processes sharing them, so the sum is the memory the tree really holds)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    rss = pss = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            pass
    return rss, pss


def run_measured(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> dict:
    """Run `cmd`: exit code, wall and CPU time, peak RSS (wait4's ru_maxrss, and the process
    tree's RSS and PSS sums polled every 0.1 s) and every output line with its second (also in `log_path`)."""
    began = time.time()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, bufsize=1
    )
    lines: list[tuple[float, str, str]] = []
    lock = threading.Lock()

    def read(stream: Any, name: str) -> None:
        for line in stream:
            with lock:
                lines.append((time.time() - began, name, line.rstrip("\n")))

    readers = [
        threading.Thread(target=read, args=(s, n), daemon=True)
        for s, n in ((proc.stdout, "out"), (proc.stderr, "err"))
    ]
    for r in readers:
        r.start()
    peak_tree = peak_pss = 0
    stop = threading.Event()

    def poll() -> None:
        nonlocal peak_tree, peak_pss
        while not stop.is_set():
            rss, pss = _tree_memory(proc.pid)
            peak_tree, peak_pss = max(peak_tree, rss), max(peak_pss, pss)
            stop.wait(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    _, status, usage = os.wait4(proc.pid, 0)
    stop.set()
    poller.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join()
    wall = time.time() - began
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("".join(f"{t:8.2f} {n} {line}\n" for t, n, line in lines))
    return {
        "rc": proc.returncode,
        "wall_s": round(wall, 2),
        "peak_rss_gb": round(usage.ru_maxrss * 1024 / 1e9, 3),  # Linux: KiB
        "peak_tree_rss_gb": round(peak_tree / 1e9, 3),
        "peak_tree_pss_gb": round(peak_pss / 1e9, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "lines": lines,
        "began": began,
    }


# ----- course pretrain ----------------------------------------------------------------------


def _first_at(lines: list, prefix: str) -> float | None:
    """Seconds after the start at which the first output line starting with `prefix` came."""
    for t, _, line in lines:
        if line.startswith(prefix):
            return round(t, 2)
    return None


def pretrain(
    corpus: Path, output_dir: Path, store_dir: Path, args: argparse.Namespace, log_path: Path
) -> dict[str, Any]:
    """One `course pretrain` run: peak RSS, time to the first step and the phases it printed."""
    flags = [
        "pretrain",
        "--corpus",
        str(corpus),
        "--steps",
        str(args.steps),
        "--threads",
        str(args.threads),
        "--output-dir",
        str(output_dir),
        "--store-dir",
        str(store_dir),
        "--no-progress",
    ]
    m = run_measured([sys.executable, "-c", HOOK, *flags], log_path)
    first = None
    for _t, _, line in m["lines"]:
        if line.startswith("corpus_scale: first step done "):
            first = round(float(line.split()[-1]) - m["began"], 2)
    row = {
        "command": "course " + " ".join(flags),
        "rc": m["rc"],
        "seconds_to_first_step": first,
        "wall_s": m["wall_s"],
        "cpu_s": m["cpu_s"],
        "peak_rss_gb": m["peak_rss_gb"],
        "peak_tree_rss_gb": m["peak_tree_rss_gb"],
        "phases_s": {  # when the CLI printed each line (seconds after the start)
            "tokenizer_line": _first_at(m["lines"], "training a "),
            "sample_read_line": _first_at(m["lines"], "  tokenizer: training on a seeded sample"),
            "first_encoded_line": _first_at(m["lines"], "  tokenizer: encoded "),
            "store_ready_line": _first_at(m["lines"], "token store (train)"),
            "model_line": next((round(t, 2) for t, _, x in m["lines"] if " layers x " in x), None),
            "first_step": first,
        },
        "store_lines": [x for _, _, x in m["lines"] if x.startswith("token store (")],
        "examples_line": next((x for _, _, x in m["lines"] if " layers x " in x), None),
        "log": str(log_path),
    }
    if m["rc"] != 0:
        row["error_tail"] = [x for _, _, x in m["lines"][-5:]]
    return row


def store_bytes(store_dir: Path) -> int:
    """Bytes of every token store (not the tokenizer or the scan) under `store_dir`."""
    total = 0
    for sub in store_dir.iterdir():
        if sub.is_dir() and not sub.name.startswith("."):
            total += sum(f.stat().st_size for f in sub.iterdir() if f.is_file())
    return total


def pretrain_rows(sizes: list[int], built: dict[int, dict], args: argparse.Namespace) -> dict:
    """The fresh and the second run at every size."""
    rows = {}
    for mb in sizes:
        corpus = Path(built[mb]["path"])
        base = args.scratch / f"runs-{mb}MB"
        shutil.rmtree(base, ignore_errors=True)
        store_dir = base / "store"
        print(f"{mb} MB: first run ...", flush=True)
        first = pretrain(corpus, base / "first", store_dir, args, base / "first.log")
        print(f"  {_brief(first)}", flush=True)
        print(f"{mb} MB: second run (same --store-dir) ...", flush=True)
        second = pretrain(corpus, base / "second", store_dir, args, base / "second.log")
        print(f"  {_brief(second)}", flush=True)
        rows[str(mb)] = {
            "corpus": {k: v for k, v in built[mb].items() if k != "pool_key"},
            "store_mb": round(store_bytes(store_dir) / 1e6, 1),
            "first_run": first,
            "second_run": second,
            **_when(),
        }
    return rows


def _when() -> dict[str, Any]:
    """The command, date and load average of a row (rows of earlier invocations are kept)."""
    prov = provenance(0)
    return {
        "command": prov["command"],
        "date": prov["date"],
        "load_average_at_start": prov["machine"]["load_average_at_start"],
    }


def _brief(row: dict) -> str:
    """One line per run for the console."""
    return (
        f"rc {row['rc']}, first step at {row['seconds_to_first_step']} s, peak RSS "
        f"{row['peak_rss_gb']} GB (tree {row['peak_tree_rss_gb']} GB), wall {row['wall_s']} s"
    )


# ----- encoding: build_store vs datasets ----------------------------------------------------


def encode_rows(sizes: list[int], built: dict[int, dict], args: argparse.Namespace) -> dict:
    """build_store against datasets.map(batched=True, num_proc=workers) on the same text."""
    try:
        import datasets  # noqa: F401
    except ImportError:
        print("encoding comparison skipped: `datasets` is not installed (pip install datasets)")
        return {}
    import datasets as ds_module
    import tokenizers

    rows = {}
    for mb in sizes:
        corpus = Path(built[mb]["path"])
        store_dir = args.scratch / f"runs-{mb}MB" / "store"
        tokenizers_found = sorted(store_dir.glob("tokenizer-*.json"))
        if not tokenizers_found:
            print(
                f"encoding at {mb} MB skipped: no trained tokenizer in {store_dir} (run the "
                f"pretrain part at {mb} MB first)"
            )
            continue
        tok = str(tokenizers_found[0])
        base = args.scratch / f"encode-{mb}MB"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        text_bytes = built[mb]["text_mb"] * 1e6
        print(f"{mb} MB: build_store ...", flush=True)
        ours = run_measured(
            [sys.executable, "-c", OURS, str(corpus), tok, "wordpiece", str(base / "store")],
            base / "ours.log",
        )
        print(f"{mb} MB: datasets map(num_proc={args.workers}) ...", flush=True)
        theirs = run_measured(
            [
                sys.executable,
                "-c",
                DATASETS,
                str(corpus),
                tok,
                "wordpiece",
                str(base / "hf-cache"),
                str(args.workers),
            ],
            base / "datasets.log",
        )
        row: dict[str, Any] = {
            "text_mb": built[mb]["text_mb"],
            "datasets_version": ds_module.__version__,
            "tokenizers_version": tokenizers.__version__,
            "workers": args.workers,
            **_when(),
        }
        for name, m in (("build_store", ours), ("datasets", theirs)):
            result = _last_json(m["lines"])
            row[name] = {
                "rc": m["rc"],
                "wall_s": m["wall_s"],
                "cpu_s": m["cpu_s"],
                "peak_rss_gb": m["peak_rss_gb"],
                "peak_tree_rss_gb": m["peak_tree_rss_gb"],
                "peak_tree_pss_gb": m["peak_tree_pss_gb"],
                **result,
            }
            if result.get("seconds"):
                row[name]["mb_per_s"] = round(text_bytes / 1e6 / result["seconds"], 2)
            if m["rc"] != 0:
                row[name]["error_tail"] = [x for _, _, x in m["lines"][-5:]]
        b, d = row["build_store"], row["datasets"]
        if b.get("mb_per_s") and d.get("mb_per_s"):
            row["datasets_over_build_store"] = round(d["mb_per_s"] / b["mb_per_s"], 2)
            # the store has one separator token between documents; datasets has none
            row["same_tokens"] = b["n_tokens"] - (b["n_documents"] - 1) == d["n_tokens"]
        shutil.rmtree(base / "hf-cache", ignore_errors=True)
        shutil.rmtree(base / "store", ignore_errors=True)
        rows[str(mb)] = row
        print(
            f"  build_store {b.get('mb_per_s')} MB/s, peak {b['peak_rss_gb']} GB | datasets "
            f"{d.get('mb_per_s')} MB/s, peak (tree PSS) {d['peak_tree_pss_gb']} GB",
            flush=True,
        )
    return rows


def _last_json(lines: list) -> dict:
    """The JSON line a measured script printed last on stdout ({} if none)."""
    for _, name, line in reversed(lines):
        if name == "out" and line.startswith("{"):
            return json.loads(line)
    return {}


# ----- results ------------------------------------------------------------------------------


def cpu_flags() -> dict[str, bool]:
    """Whether the CPU has the instructions bf16 speed depends on."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = next(x for x in text.splitlines() if x.startswith("flags")).split(":", 1)[1].split()
    except (OSError, StopIteration):
        return {}
    return {f: f in flags for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")}


def table(payload: dict) -> str:
    """The results as a markdown table."""
    lines = [
        "| corpus | documents | first run: first step | peak RSS | second run: first step | "
        "peak RSS | token stores |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for _mb, r in sorted(payload.get("pretrain", {}).items(), key=lambda kv: int(kv[0])):
        f, s = r["first_run"], r["second_run"]
        lines.append(
            f"| {r['corpus']['text_mb']} MB | {r['corpus']['documents']:,} | "
            f"{f['seconds_to_first_step']} s | {f['peak_rss_gb']} GB | "
            f"{s['seconds_to_first_step']} s | {s['peak_rss_gb']} GB | {r['store_mb']} MB |"
        )
    enc = payload.get("encoding", {})
    if enc:
        lines += [
            "",
            "| text | build_store MB/s | peak RSS | datasets MB/s | peak PSS (main + workers) | "
            "datasets / ours |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for _mb, r in sorted(enc.items(), key=lambda kv: int(kv[0])):
            b, d = r["build_store"], r["datasets"]
            lines.append(
                f"| {r['text_mb']} MB | {b.get('mb_per_s')} | {b['peak_rss_gb']} GB | "
                f"{d.get('mb_per_s')} | {d.get('peak_tree_pss_gb')} GB | "
                f"{r.get('datasets_over_build_store')}x |"
            )
    return "\n".join(lines)


def main() -> int:
    """Build the corpora, run the measurements, merge them into the results file."""
    args = parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    encode = [int(x) for x in args.encode_sizes.split(",") if x]
    built, pool = corpora(sorted(set(sizes + encode)), args.scratch, args.seed)
    path = args.out / f"{RESULTS_NAME}.json"
    payload = json.loads(path.read_text()) if path.is_file() else {}
    prov = provenance(args.threads)
    prov["machine"]["cpu_flags"] = cpu_flags()
    import numpy
    import tokenizers

    prov.update(numpy=numpy.__version__, tokenizers=tokenizers.__version__)
    payload.update(benchmark="corpus_scale", text_pool=pool, **prov)
    payload.setdefault("commands", [])
    if prov["command"] not in payload["commands"]:
        payload["commands"].append(prov["command"])
    if not args.no_runs:
        payload.setdefault("pretrain", {}).update(pretrain_rows(sizes, built, args))
    if not args.no_encode:
        payload.setdefault("encoding", {}).update(encode_rows(encode, built, args))
    write_results(RESULTS_NAME, payload, args.out)
    print(table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
