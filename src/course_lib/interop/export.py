"""A course checkpoint as a folder `transformers` loads directly, and a transformers folder as a
course checkpoint: what `course export` and `course import` do.

Export writes config.json + model.safetensors (transformers' own save_pretrained) and a fast
tokenizer (tokenizer.json + tokenizer_config.json with the special tokens). The model is the
exact equivalent: post-LN models map onto their own transformers family; pre-LN BERT, RoBERTa
and DistilBERT onto RobertaPreLayerNorm (see prelayernorm.py). config.json also records our
class and config under "course_lib", so `course import` rebuilds the very same model.
Before anything is written, both models run on one sentence and must agree.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from course_lib.interop import prelayernorm
from course_lib.interop.core import BY_HF_CLASS, from_transformers, to_transformers

METADATA_KEY = "course_lib"
# A transformers folder without (a supported) "architectures": its masked-LM class.
MLM_CLASS_BY_MODEL_TYPE = {
    "bert": "BertForMaskedLM",
    "roberta": "RobertaForMaskedLM",
    "albert": "AlbertForMaskedLM",
    "deberta-v2": "DebertaV2ForMaskedLM",
    "distilbert": "DistilBertForMaskedLM",
    "roberta-prelayernorm": "RobertaPreLayerNormForMaskedLM",
    "electra": "ElectraForPreTraining",  # the discriminator: the model ELECTRA keeps
    "modernbert": "ModernBertForMaskedLM",
}
OBJECTIVE_BY_CLASS = {
    "BertForPreTraining": "mlm+nsp",
    "AlbertForPreTraining": "mlm+sop",
    "ElectraForPreTraining": "rtd",
}
MAX_DIFFERENCE = 1e-4  # logits of the two models on the check sentence (fp32: ~1e-6 seen)


@dataclass
class ExportResult:
    """What was written, as what, and how closely the two models agreed."""

    out_dir: Path
    hf_class: str
    course_class: str
    max_difference: float
    mask_token: str
    note: str = ""


def check_empty_target(out_dir: str | Path) -> Path:
    """`out_dir` as a Path if it is absent or an empty folder; ValueError (one line) otherwise:
    a file, a folder with files, a symbolic link, or a path under a file."""
    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise ValueError(
            f"{out_dir} is a symbolic link; pass a new or empty folder (nothing is written "
            "through a link)"
        )
    existing = out_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing != out_dir and not existing.is_dir():
        raise ValueError(
            f"{out_dir} is inside {existing}, which is a file; pass a folder path (nothing was "
            "written)"
        )
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        what = "a file" if not out_dir.is_dir() else "not empty"
        raise ValueError(
            f"{out_dir} is {what}; pass a new or empty folder (nothing is overwritten)"
        )
    return out_dir


def _publish(tmp: Path, out_dir: Path) -> None:
    """Move the finished folder into place (an existing empty `out_dir` is replaced)."""
    if out_dir.is_dir():
        out_dir.rmdir()  # empty, checked before; fails rather than delete anything
    tmp.rename(out_dir)


def _tmp_sibling(out_dir: Path) -> Path:
    """A new folder beside `out_dir`, created here (so removing it removes only our files)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    while True:
        tmp = out_dir.with_name(f".{out_dir.name}.export-tmp" + (f"-{n}" if n else ""))
        try:
            tmp.mkdir()
            return tmp
        except FileExistsError:
            n += 1


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No progress bars or load warnings from transformers: the commands print their own line
    (what was left out, how closely the models agree)."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


# --- the model conversion ------------------------------------------------------------------------


def hf_equivalent(model: nn.Module) -> nn.Module:
    """The transformers model computing exactly what `model` computes; ValueError (one line,
    the reason) when transformers has none."""
    if getattr(model.config, "pre_layer_norm", False):
        return prelayernorm.to_roberta_prelayernorm(model)
    try:
        return to_transformers(model)
    except ValueError as err:
        raise ValueError(str(err).rstrip(".")) from None


def mlm_part(model: nn.Module) -> nn.Module:
    """The masked-LM model inside a pretraining model (MLM + NSP/SOP): the same weights, no
    sentence head and no pooler."""
    from course_lib.models import MODEL_CLASSES

    name = type(model).__name__.replace("ForPreTraining", "ForMaskedLM")
    mlm = MODEL_CLASSES[name](model.config)
    target = mlm.state_dict()
    with torch.no_grad():
        for key, value in model.state_dict().items():
            if key in target:
                target[key].copy_(value)
    return mlm.train(model.training)


def _check_sentence(tokenizer: Any) -> dict[str, list[int]]:
    text = f"a {tokenizer.mask_token} of the model , checked once"
    return tokenizer.encode(text)


def main_logits(output: Any) -> torch.Tensor:
    """A model output's main tensor: MLM or task logits, else the last hidden state."""
    for name in ("mlm_logits", "logits", "prediction_logits", "last_hidden_state"):
        value = getattr(output, name, None)
        if value is not None:
            return value
    if getattr(output, "start_logits", None) is not None:
        return torch.stack([output.start_logits, output.end_logits], dim=-1)
    raise TypeError(f"no logits in {type(output).__name__}")


@torch.no_grad()
def max_difference(ours: nn.Module, theirs: nn.Module, encoded: dict[str, list[int]]) -> float:
    """Largest |difference| of the two models' outputs on one encoded sentence (eval mode)."""
    was = ours.training, theirs.training
    ours.eval(), theirs.eval()
    inputs = {k: torch.tensor([encoded[k]]) for k in ("input_ids", "attention_mask")}
    types = torch.tensor([encoded["token_type_ids"]])
    a = main_logits(ours(**inputs, token_type_ids=types)).float()
    # transformers' DistilBERT takes no segments; models with one segment type default to zeros
    hf_types = {"token_type_ids": types} if getattr(theirs.config, "type_vocab_size", 0) > 1 else {}
    b = main_logits(theirs(**inputs, **hf_types)).float()
    ours.train(was[0]), theirs.train(was[1])
    return float((a - b).abs().max())


# --- export ---------------------------------------------------------------------------------------


def export_checkpoint(
    checkpoint: str | Path, out_dir: str | Path, mlm_only: bool = False
) -> ExportResult:
    """Write `checkpoint` (a course checkpoint folder) to `out_dir` as a transformers folder.

    `mlm_only`: export the masked-LM part of a pretraining model (needed when transformers has
    no class with its sentence head, as for pre-LN BERT + NSP).
    """
    from course_lib.tokenization import CourseTokenizer
    from course_lib.training.checkpoint import load_pretrained, read_state

    checkpoint = Path(checkpoint)
    out_dir = check_empty_target(out_dir)
    state = read_state(checkpoint)
    if not (checkpoint / "tokenizer.json").is_file():
        raise ValueError(
            f"{checkpoint} has no tokenizer.json; export a checkpoint that course pretrain wrote"
        )
    model = load_pretrained(checkpoint)
    tokenizer = CourseTokenizer.load(checkpoint / "tokenizer.json")
    note = ""
    if hasattr(model, "discriminator"):  # ELECTRA's pretrainer: the discriminator is the model
        note = (
            "the discriminator was exported (transformers' ElectraForPreTraining); the generator, "
            "used only in pretraining, was left out"
        )
        model = model.discriminator
    elif mlm_only and type(model).__name__.endswith("ForPreTraining"):
        head = "SOP" if model.config.model_type == "albert" else "NSP"
        note = f"the {head} head and the pooler were left out (--mlm-only)"
        model = mlm_part(model)
    hf_model = hf_equivalent(model)
    hf_model.config.update(
        {
            METADATA_KEY: {
                "model_class": type(model).__name__,
                "config": model.config.to_dict(),
                "exported_from_step": state.get("step"),
                # how it was trained, so `course evaluate` after an import measures the same way
                "run": state.get("run") if isinstance(state.get("run"), dict) else {},
                "seed": (state.get("training_config") or {}).get("seed", 0),
            }
        }
    )
    diff = max_difference(model, hf_model, _check_sentence(tokenizer))
    if not diff <= MAX_DIFFERENCE:
        raise ValueError(
            f"the transformers model differs from the checkpoint by {diff:.2e} on a test "
            f"sentence; nothing was written (please report this)"
        )
    hf_tokenizer = tokenizer.to_transformers(model_max_length=_max_tokens(model.config))
    from course_lib.training.checkpoint import write_error

    tmp, writing = None, out_dir
    try:
        tmp = _tmp_sibling(out_dir)
        with _quiet_transformers():
            writing = out_dir / "model.safetensors"  # and config.json
            hf_model.save_pretrained(tmp)
            writing = out_dir / "tokenizer.json"  # and tokenizer_config.json
            hf_tokenizer.save_pretrained(tmp)
    except BaseException as err:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)  # our own half-written folder
        failed = write_error(err, writing, f"nothing was written; {checkpoint} is unchanged")
        if failed is err:
            raise
        raise failed from err
    _publish(tmp, out_dir)
    return ExportResult(
        out_dir, type(hf_model).__name__, type(model).__name__, diff, tokenizer.mask_token, note
    )


# --- import ---------------------------------------------------------------------------------------


def _max_tokens(config: Any) -> int:
    """The longest input the model reads: RoBERTa numbers positions from pad + 1."""
    shift = config.pad_token_id + 1 if config.model_type == "roberta" else 0
    return config.max_position_embeddings - shift


def _hf_class_name(config: Any) -> str:
    supported = set(BY_HF_CLASS) | set(prelayernorm.CLASSES.values())
    for name in getattr(config, "architectures", None) or []:
        if name in supported:
            return name
    if config.model_type in MLM_CLASS_BY_MODEL_TYPE:
        return MLM_CLASS_BY_MODEL_TYPE[config.model_type]
    raise ValueError(
        f"model_type {config.model_type!r} has no course_lib family; supported: "
        f"{sorted(MLM_CLASS_BY_MODEL_TYPE)}"
    )


def _prelayernorm_target(hf_model: nn.Module, metadata: dict | None) -> tuple[type, Any]:
    """Our class and config for a RobertaPreLayerNorm model: the recorded ones, else RoBERTa."""
    from course_lib.interop.bert import SHARED_FIELDS
    from course_lib.models import MODEL_CLASSES, RobertaConfig, config_from_dict

    if metadata is not None:
        return MODEL_CLASSES[metadata["model_class"]], config_from_dict(metadata["config"])
    hf_name = type(hf_model).__name__
    ours = {v: k for k, v in prelayernorm.CLASSES.items() if k.startswith("Roberta")}[hf_name]
    hf = hf_model.config
    config = RobertaConfig(
        **{f: getattr(hf, f) for f in SHARED_FIELDS},
        num_labels=hf.num_labels,
        classifier_dropout=getattr(hf, "classifier_dropout", None),
        pre_layer_norm=True,
    )
    return MODEL_CLASSES[ours], config


def course_equivalent(hf_model: nn.Module) -> nn.Module:
    """The course_lib model computing what `hf_model` computes: the recorded class and config
    when the folder came from `course export`, else translated from the transformers config."""
    from course_lib.config import config_from_dict

    metadata = getattr(hf_model.config, METADATA_KEY, None)
    if type(hf_model).__name__.startswith("RobertaPreLayerNorm"):
        cls, config = _prelayernorm_target(hf_model, metadata)
        return prelayernorm.from_roberta_prelayernorm(hf_model, cls, config)
    config = None
    if (
        metadata is not None
        and metadata.get("model_class") == BY_HF_CLASS[type(hf_model).__name__].ours.__name__
    ):
        config = config_from_dict(metadata["config"])
    return from_transformers(hf_model, config=config)


def _course_tokenizer(hf_dir: Path) -> Any:
    from tokenizers import Tokenizer

    from course_lib.tokenization import CourseTokenizer

    if (hf_dir / "tokenizer.json").is_file():
        return CourseTokenizer.from_file(hf_dir / "tokenizer.json")
    from transformers import AutoTokenizer

    try:
        hf_tokenizer = AutoTokenizer.from_pretrained(str(hf_dir), local_files_only=True)
        backend = hf_tokenizer.backend_tokenizer
    except (OSError, ValueError, AttributeError) as err:
        raise ValueError(
            f"{hf_dir} has no tokenizer.json and transformers could not build one "
            f"({str(err).splitlines()[0][:120]}); copy the model's tokenizer files into it"
        ) from None
    return CourseTokenizer(Tokenizer.from_str(backend.to_str()), _family_of(backend))


def _family_of(backend: Any) -> str:
    from course_lib.tokenization.families import MODEL_TYPE_TO_FAMILY

    kind = json.loads(backend.to_str())["model"]["type"]
    if kind not in MODEL_TYPE_TO_FAMILY:
        raise ValueError(
            f"the tokenizer is a {kind} model; course_lib reads WordPiece, BPE, Unigram"
        )
    return MODEL_TYPE_TO_FAMILY[kind]


def _first_line(err: BaseException, limit: int = 160) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _weights_file(hf_dir: Path) -> Path:
    """The weights file of a transformers folder (the first of several shards), for messages."""
    for pattern in ("*.safetensors", "*.bin"):
        found = sorted(hf_dir.glob(pattern))
        if found:
            return found[0]
    return hf_dir / "model.safetensors"


def _load_hf_model(cls: Any, hf_dir: Path, fix: str) -> tuple[nn.Module, dict]:
    """`cls.from_pretrained(hf_dir)` with loading info; a damaged folder (truncated weights,
    config.json sizes that do not fit them) is one ValueError naming the file and the fix."""
    kwargs = dict(local_files_only=True, output_loading_info=True, dtype=torch.float32)
    try:
        with _quiet_transformers():
            return cls.from_pretrained(str(hf_dir), **kwargs)
    except Exception as err:  # safetensors, torch and transformers each raise their own kinds
        first = err
    weights = _weights_file(hf_dir)
    if "mismatched_sizes" in str(first) or "size mismatch" in str(first):
        detail = ""
        try:  # load again, tolerating the mismatch, only to name the first tensor that differs
            with _quiet_transformers():
                _, info = cls.from_pretrained(str(hf_dir), ignore_mismatched_sizes=True, **kwargs)
            name, stored, expected = sorted(info["mismatched_keys"])[0]
            detail = f": {name} is {list(stored)} in the weights, {list(expected)} by config.json"
        except Exception:
            pass
        raise ValueError(
            f"{hf_dir / 'config.json'} does not fit the weights in {weights.name}{detail}; {fix}"
        ) from None
    if not weights.exists():
        raise ValueError(
            f"transformers could not load {hf_dir} ({_first_line(first)}); {fix}"
        ) from None
    if weights.stat().st_size == 0:
        why = "it is empty"
    else:
        why = f"it is damaged or truncated ({_first_line(first)})"
    raise ValueError(f"cannot load {weights}: {why}; {fix}") from None


def import_transformers(hf_dir: str | Path, out_dir: str | Path) -> tuple[Path, nn.Module, str]:
    """Write the transformers folder `hf_dir` (e.g. bert-base-uncased on disk) to `out_dir` as a
    course checkpoint that `course fill-mask` and `course evaluate` read. Returns (out_dir, the
    course model, a note on tensors the course model does not use)."""
    import transformers

    from course_lib.training.checkpoint import save_checkpoint

    hf_dir = Path(hf_dir)
    if not (hf_dir / "config.json").is_file():
        raise ValueError(
            f"{hf_dir} is not a transformers model folder (no config.json); pass the folder that "
            f"holds config.json and the weights"
        )
    out_dir = check_empty_target(out_dir)
    fix = "copy the model's files again (config.json and the weights must come from one model)"
    try:
        hf_config = transformers.AutoConfig.from_pretrained(str(hf_dir), local_files_only=True)
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise ValueError(
            f"transformers could not read {hf_dir / 'config.json'} ({_first_line(err)}); {fix}"
        ) from None
    hf_name = _hf_class_name(hf_config)
    hf_model, info = _load_hf_model(getattr(transformers, hf_name), hf_dir, fix)
    if info.get("missing_keys"):
        missing = sorted(info["missing_keys"])
        raise ValueError(
            f"{hf_dir} lacks {len(missing)} weights of {hf_name} (e.g. {missing[0]}); they would "
            f"be random, so nothing was written"
        )
    unused = sorted(info.get("unexpected_keys") or [])
    note = f"{len(unused)} tensors that {hf_name} does not use were left out" if unused else ""
    tokenizer = _course_tokenizer(hf_dir)
    try:
        model = course_equivalent(hf_model.eval())
    except AssertionError as err:
        raise ValueError(f"the weights do not fit the recorded config: {str(err)[:160]}") from None
    except (KeyError, TypeError) as err:  # the "course_lib" entry that course export wrote
        raise ValueError(
            f"{hf_dir / 'config.json'} holds a damaged {METADATA_KEY!r} entry ({_first_line(err)}); "
            f"remove that entry or {fix}"
        ) from None
    diff = max_difference(model, hf_model, _check_sentence(tokenizer))
    if not diff <= MAX_DIFFERENCE:
        raise ValueError(
            f"the course model differs from {hf_dir} by {diff:.2e}; nothing was written"
        )
    name = type(model).__name__
    max_length = _max_tokens(model.config)
    metadata = getattr(hf_model.config, METADATA_KEY, None) or {}
    run = {
        "family": model.config.model_type,
        "corpus": "builtin",
        "max_length": min(max_length, 128),
    }
    state = {
        "step": metadata.get("exported_from_step") or 0,
        "imported_from": str(hf_dir),
        "run": {**run, **(metadata.get("run") or {})},
        "training_config": {
            "objective": OBJECTIVE_BY_CLASS.get(name, "mlm"),
            "seed": metadata.get("seed", 0),
        },
    }
    if hasattr(model, "discriminator_head"):
        no_head = f"{name} is ELECTRA's discriminator: try course detect, or fine-tune it"
        note = f"{note}; {no_head}" if note else no_head
    elif not hasattr(model, "mlm_head"):
        no_head = f"{name} has no masked-LM head: fine-tune it; course fill-mask needs one"
        note = f"{note}; {no_head}" if note else no_head
    save_checkpoint(out_dir, model, state=state, tokenizer=tokenizer)
    return out_dir, model, note
