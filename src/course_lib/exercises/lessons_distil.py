"""Chapter 04 (DistilBERT) build checks: the lessons' "build it yourself" cells.

Each `check_*` is a `BuildCheck`: it runs the learner's function on fresh inputs (tiny teachers
and students it builds itself), compares with the library (`course_lib.objectives.distillation`,
`course_lib.models.distilbert`, `course_lib.labs.distil`), probes the edges the lessons talk about
(T = 1, logits of -inf and of 1000, a row of padding only, L_ce over all tokens or the masked
ones, post-LN teachers without a final norm, a one-layer student, a one-token sequence, inputs
left unmodified) and names the first mistake it recognises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.config import BertConfig, tiny_config
from course_lib.exercises.build import BuildCheck
from course_lib.exercises.core import (
    ExerciseError,
    NotWrittenYet,
    expect,
    expect_tensor,
    run_learner_code,
)
from course_lib.labels import IGNORE_INDEX
from course_lib.labs import distil as labs_distil
from course_lib.models.bert import BertForMaskedLM
from course_lib.models.distilbert import DistilBertForMaskedLM
from course_lib.objectives.distillation import DistillationObjective, init_student_from_teacher


def _call(what: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """run_learner_code, with the case (`what`) named in front of a crash's message."""
    try:
        return run_learner_code(fn, *args, **kwargs)
    except NotWrittenYet:
        raise
    except ExerciseError as err:
        raise ExerciseError(f"{what}: {err}") from None


def _close(a: Tensor, b: Tensor, atol: float = 1e-5) -> bool:
    return a.shape == b.shape and bool(
        torch.allclose(a.detach().double(), b.detach().double(), atol=atol, rtol=1e-4)
    )


def _f(t: Tensor) -> float:
    return float(t.detach())


# ----- 06 · soft targets at a temperature --------------------------------------------------------


def library_soften(logits: Tensor, temperature: float) -> Tensor:
    """softmax(logits / T) over the last dimension: the soft targets at temperature T."""
    return torch.softmax(logits / temperature, dim=-1)


def _probe_soften(soften: Callable) -> str:
    g = torch.Generator().manual_seed(6)
    special = torch.randn(8, generator=g) * 3
    special[2] = float("-inf")  # a special token the lesson removes from the vocabulary
    cases = [
        (special, 1.0, "one row with a -inf logit, T = 1"),
        (special, 2.0, "one row with a -inf logit, T = 2"),
        (special, 0.5, "T = 0.5 (sharper)"),
        (torch.randn(3, 5, generator=g) * 2, 4.0, "a batch of 3 rows (3, 5), T = 4"),
        (torch.tensor([1000.0, 998.0, 990.0]), 1.0, "logits of 1000, T = 1"),
    ]
    for logits, t, what in cases:
        before = logits.clone()
        got = expect_tensor(_call(what, soften, logits, t), "soften")
        expect(
            torch.equal(before, logits),
            f"{what}: your function changed the logits it was given (an in-place `/=`?): the "
            "lesson reuses them at every temperature. Divide into a new tensor.",
        )
        want = library_soften(logits, t)
        expect(
            got.shape == want.shape,
            f"{what}: the soft targets have the logits' shape {tuple(want.shape)}, got "
            f"{tuple(got.shape)}.",
        )
        if _close(got, want):
            continue
        if bool(got.isnan().any()):
            raise ExerciseError(
                f"{what}: your soft targets hold NaN. exp() of a large logit overflows and "
                "-inf - -inf is NaN: use torch.softmax (it subtracts the row's maximum and gives "
                "a -inf logit probability 0)."
            )
        if logits.dim() == 2 and _close(got, torch.softmax(logits / t, dim=0)):
            raise ExerciseError(
                f"{what}: the softmax runs down the rows (dim=0): normalise over the vocabulary, "
                "the last dimension (dim=-1)."
            )
        sums = got.sum(-1)
        if _close(sums, torch.full_like(sums, 1.0 / t)) and t != 1.0:
            raise ExerciseError(
                f"{what}: each row sums to {_f(sums.flatten()[0]):.2f} = 1/T: divide the LOGITS "
                "by T before the softmax, not the probabilities after it."
            )
        expect(
            _close(sums, torch.ones_like(sums), atol=1e-4),
            f"{what}: each row must sum to 1 (a distribution over the vocabulary); yours sum to "
            f"{[round(_f(v), 3) for v in sums.flatten()[:3]]}.",
        )
        if _close(got, library_soften(logits * t, 1.0)):
            raise ExerciseError(
                f"{what}: you multiplied the logits by T: T > 1 must FLATTEN the distribution "
                "(divide by T), T < 1 sharpen it."
            )
        raise ExerciseError(
            f"{what}: got {[round(_f(v), 4) for v in got.flatten()[:4]]}..., expected "
            f"{[round(_f(v), 4) for v in want.flatten()[:4]]}... = softmax(logits / T)."
        )
    return "softmax(logits / T) at T = 0.5, 1, 2 and 4, with -inf logits and logits of 1000."


check_soften = BuildCheck(
    _probe_soften,
    fallback=library_soften,
    fallback_name="softmax(logits / T)",
    todo="return the probabilities of `logits` softened by temperature T (over the last dimension).",
)


# ----- 06 · the triple loss ----------------------------------------------------------------------


def library_distillation_loss(
    student: torch.nn.Module,
    teacher: torch.nn.Module,
    batch: dict[str, Tensor],
    T: float = 2.0,
    alpha_ce: float = 5.0,
    alpha_mlm: float = 2.0,
    alpha_cos: float = 1.0,
    ce_on_masked_only: bool = False,
) -> tuple[Tensor, dict[str, Tensor]]:
    """DistilBERT's triple loss as the library computes it: (weighted sum, its three terms)."""
    objective = DistillationObjective(
        teacher, T, alpha_ce, alpha_mlm, alpha_cos, restrict_ce_to_mask=ce_on_masked_only
    )
    return objective(student, batch)


def _tiny_teacher(pre_layer_norm: bool, layers: int, seed: int) -> BertForMaskedLM:
    torch.manual_seed(seed)
    config = tiny_config(BertConfig, 30, 16, layers=layers, heads=2, max_positions=12)
    teacher = BertForMaskedLM(config.replace(intermediate_size=32, pre_layer_norm=pre_layer_norm))
    with torch.no_grad():  # LayerNorms and biases start at 1 / 0: make every tensor distinctive
        for p in teacher.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return teacher.eval()


def _distil_batch() -> dict[str, Tensor]:
    """Three rows: full, ending in padding, and padding only; masked positions in rows 0 and 1."""
    g = torch.Generator().manual_seed(8)
    ids = torch.randint(5, 30, (3, 8), generator=g)
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3, [0] * 8])
    ids[mask == 0] = 0
    labels = torch.full_like(ids, IGNORE_INDEX)
    for r, c in ((0, 1), (0, 6), (1, 3)):
        labels[r, c] = ids[r, c]
        ids[r, c] = 4  # [MASK]
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "labels": labels,
        "token_type_ids": torch.zeros_like(ids),
    }


def _kl_rows(s: Tensor, t: Tensor, temperature: float) -> Tensor:
    log_s, log_t = F.log_softmax(s / temperature, -1), F.log_softmax(t / temperature, -1)
    return (log_t.exp() * (log_t - log_s)).sum(-1)


def _diagnose_ce(
    got: Tensor, s: Tensor, t: Tensor, batch: dict, temperature: float, masked_only: bool, what: str
) -> None:
    real, masked = batch["attention_mask"].bool(), batch["labels"] != IGNORE_INDEX
    rows = masked if masked_only else real
    kl = _kl_rows(s, t, temperature)
    candidates = {
        "L_ce is averaged over the masked positions only: the reference default (and "
        "ce_on_masked_only=False) distils EVERY real token's distribution": kl[masked].mean()
        * temperature**2,
        "L_ce with ce_on_masked_only=True must average over the masked positions only (the "
        "reference's --restrict_ce_to_mask)": kl[real].mean() * temperature**2,
        "L_ce counts the padding positions too (row 2 is only padding): keep the real tokens, "
        "attention_mask == 1": kl.mean() * temperature**2,
        f"L_ce lacks the T^2 factor (at T = {temperature:g} your value is the KL alone)": kl[
            rows
        ].mean(),
        "L_ce is the KL the wrong way round: the teacher is the target, KL(t || s)": _kl_rows(
            t, s, temperature
        )[rows].mean()
        * temperature**2,
    }
    for message, value in candidates.items():
        if _close(got, value):
            raise ExerciseError(f"{what}: {message}.")


def _diagnose_cos(got: Tensor, hs: Tensor, ht: Tensor, mask: Tensor, what: str) -> None:
    if bool(got.isnan()):
        raise ExerciseError(
            f"{what}: L_cos is NaN. Row 2 of the batch is padding only: a mean per sentence "
            "divides by 0 there. Average 1 - cos over all real tokens at once."
        )
    cos = F.cosine_similarity(hs, ht, dim=-1)
    candidates = {
        "L_cos counts the padding positions too: average 1 - cos over the real tokens only": (
            1 - cos
        ).mean(),
        "L_cos must be 1 - cos (0 when the directions agree), not cos": cos[mask.bool()].mean(),
    }
    for message, value in candidates.items():
        if _close(got, value):
            raise ExerciseError(f"{what}: {message}.")


def _probe_distillation_loss(my_distillation_loss: Callable) -> str:
    teacher = _tiny_teacher(pre_layer_norm=True, layers=4, seed=1)
    student = init_student_from_teacher(teacher)
    with torch.no_grad():  # a student that is not yet its teacher: every term non-zero
        for p in student.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    student.eval()
    batch = _distil_batch()
    cases = [  # (kwargs, what the case is)
        ({}, "the defaults (T = 2, weights 5 / 2 / 1, L_ce over every real token)"),
        (
            dict(T=1.0, alpha_ce=1.0, alpha_mlm=0.5, alpha_cos=3.0, ce_on_masked_only=True),
            "T = 1, weights 1 / 0.5 / 3, ce_on_masked_only=True",
        ),
        (dict(T=4.0, alpha_ce=2.0, alpha_mlm=1.0, alpha_cos=0.5), "T = 4, weights 2 / 1 / 0.5"),
    ]
    with torch.no_grad():
        out_t = teacher(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        out_s = student(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    for kwargs, what in cases:
        before = {k: v.clone() for k, v in batch.items()}
        for p in (*teacher.parameters(), *student.parameters()):
            p.grad = None
        out = _call(what, my_distillation_loss, student, teacher, batch, **kwargs)
        expect(
            all(torch.equal(before[k], batch[k]) for k in before),
            f"{what}: your function changed the batch: the training loop reuses it.",
        )
        expect(
            isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict),
            "return (the weighted loss, {'ce_loss': ..., 'mlm_loss': ..., 'cos_loss': ...}).",
        )
        loss, terms = out
        loss = expect_tensor(loss, "my_distillation_loss")
        missing = {"ce_loss", "mlm_loss", "cos_loss"} - set(terms)
        expect(not missing, f"the terms dict lacks {sorted(missing)}.")
        want, want_terms = library_distillation_loss(student, teacher, batch, **kwargs)
        t = kwargs.get("T", 2.0)
        ce = expect_tensor(terms["ce_loss"], "terms['ce_loss']")
        if not _close(ce, want_terms["ce_loss"]):
            _diagnose_ce(
                ce,
                out_s.mlm_logits,
                out_t.mlm_logits,
                batch,
                t,
                kwargs.get("ce_on_masked_only", False),
                what,
            )
            raise ExerciseError(
                f"{what}: L_ce is {_f(ce):.5f}, expected {_f(want_terms['ce_loss']):.5f} = T^2 x "
                "the mean KL(teacher || student) of the softened distributions."
            )
        mlm = expect_tensor(terms["mlm_loss"], "terms['mlm_loss']")
        if not _close(mlm, want_terms["mlm_loss"]):
            masked = batch["labels"] != IGNORE_INDEX
            soft = F.cross_entropy(out_s.mlm_logits[masked] / t, batch["labels"][masked])
            if t != 1.0 and _close(mlm, soft):
                raise ExerciseError(
                    f"{what}: L_mlm is taken at temperature T: the true tokens are one-hot "
                    "labels, compare them with the student's plain logits."
                )
            raise ExerciseError(
                f"{what}: L_mlm is {_f(mlm):.5f}, expected {_f(want_terms['mlm_loss']):.5f}: the "
                "student's cross-entropy against the true tokens at the masked positions."
            )
        cos = expect_tensor(terms["cos_loss"], "terms['cos_loss']")
        if not _close(cos, want_terms["cos_loss"]):
            _diagnose_cos(
                cos, out_s.last_hidden_state, out_t.last_hidden_state, batch["attention_mask"], what
            )
            raise ExerciseError(
                f"{what}: L_cos is {_f(cos):.5f}, expected {_f(want_terms['cos_loss']):.5f}: mean "
                "of 1 - cos(student, teacher) of the last hidden states over the real tokens."
            )
        if not _close(loss, want):
            weights = (
                kwargs.get(k, d)
                for k, d in (("alpha_ce", 5.0), ("alpha_mlm", 2.0), ("alpha_cos", 1.0))
            )
            a_ce, a_mlm, a_cos = weights
            if kwargs and _close(loss, 5.0 * ce + 2.0 * mlm + 1.0 * cos):
                raise ExerciseError(
                    f"{what}: your total uses the weights 5 / 2 / 1 whatever the arguments say: "
                    "use alpha_ce, alpha_mlm and alpha_cos."
                )
            raise ExerciseError(
                f"{what}: the total is {_f(loss):.5f}, expected {_f(want):.5f} = "
                f"{a_ce:g} L_ce + {a_mlm:g} L_mlm + {a_cos:g} L_cos."
            )
        expect(loss.requires_grad, f"{what}: the loss must stay differentiable (no .item()).")
        loss.backward()
        touched = [n for n, p in teacher.named_parameters() if p.grad is not None]
        expect(
            not touched,
            f"{what}: the teacher received gradients ({', '.join(touched[:1])} and more): it only provides "
            "targets. Run it under torch.no_grad().",
        )
        expect(
            any(p.grad is not None for p in student.parameters()),
            f"{what}: no gradient reached the student: keep its outputs in the graph.",
        )
    return (
        "L_ce, L_mlm, L_cos and their weighted sum at T = 1, 2 and 4, with a row of padding only."
    )


check_distillation_loss = BuildCheck(
    _probe_distillation_loss,
    fallback=library_distillation_loss,
    fallback_name="DistillationObjective",
    todo="return (alpha_ce L_ce + alpha_mlm L_mlm + alpha_cos L_cos, the three terms) for one "
    "batch, the teacher run without gradients.",
)


# ----- 07 · a student initialised from its teacher -----------------------------------------------


def _layer_hint(
    name: str, student: torch.nn.Module, teacher: BertForMaskedLM, layers: list[int]
) -> str:
    """Why the student's parameter `name` is not the right copy."""
    if ".encoder.layers." in name:
        i, rest = int(name.split(".")[3]), name.split(".", 4)[4]
        got = student.get_parameter(name)
        same = [
            j
            for j, layer in enumerate(teacher.backbone.encoder.layers)
            if torch.equal(layer.get_parameter(rest), got)
        ]
        if same:
            return (
                f"student layer {i} holds teacher layer {same[0]}, expected teacher layer "
                f"{layers[i]} (the layers are {layers}: spread evenly, the LAST one always kept — "
                "default_student_layers)."
            )
        return f"student layer {i} is not a copy of teacher layer {layers[i]}."
    if "word_embeddings" in name:
        return "copy the word embeddings (the MLM decoder reads out with the same table)."
    if "position_embeddings" in name:
        return "copy the position embeddings."
    if "embeddings.LayerNorm" in name:
        return "copy the LayerNorm that follows the embeddings."
    if "final_norm" in name:
        return "a pre-LN teacher ends with one more LayerNorm (encoder.final_norm): copy it too."
    if name.startswith("mlm_head"):
        return "copy the MLM head (dense, LayerNorm and the decoder's bias)."
    return "it differs from the teacher's."


def _probe_student_from_teacher(my_student_from_teacher: Callable) -> str:
    cases = [  # (pre-LN, teacher layers, layers argument, what)
        (True, 4, None, "a pre-LN 4-layer teacher"),
        (False, 6, None, "a post-LN 6-layer teacher (no final LayerNorm)"),
        (True, 4, [2], "layers=[2]: a student with ONE layer"),
        (True, 2, None, "a 2-layer teacher (its student has one layer)"),
    ]
    for pre_ln, depth, layers, what in cases:
        teacher = _tiny_teacher(pre_ln, depth, seed=depth)
        before = {k: v.clone() for k, v in teacher.state_dict().items()}
        try:
            args = (teacher,) if layers is None else (teacher, list(layers))
            student = run_learner_code(my_student_from_teacher, *args)
        except NotWrittenYet:
            raise
        except ExerciseError as err:
            if "NoneType" in str(err) and not pre_ln:
                raise ExerciseError(
                    f"{what}: {err} — a post-LN teacher has no final LayerNorm "
                    "(encoder.final_norm is None): copy it only when there is one."
                ) from None
            raise ExerciseError(f"{what}: {err}") from None
        reference = init_student_from_teacher(teacher, layers)
        expect(
            isinstance(student, DistilBertForMaskedLM),
            f"{what}: return a DistilBertForMaskedLM, got {type(student).__name__}.",
        )
        expect(
            all(torch.equal(before[k], v) for k, v in teacher.state_dict().items()),
            f"{what}: the teacher's weights changed: copy FROM the teacher into the student.",
        )
        n = reference.config.num_hidden_layers
        got_n = student.config.num_hidden_layers
        if got_n != n:
            hint = (
                "use the layers you are given; default_student_layers(n) only when layers is None"
                if layers is not None
                else f"half the teacher's {depth} layers (default_student_layers)"
            )
            raise ExerciseError(f"{what}: the student has {got_n} layers, expected {n}: {hint}.")
        expect(
            not student.config.type_vocab_size,
            f"{what}: the student has a segment table (type_vocab_size="
            f"{student.config.type_vocab_size}): DistilBERT drops it, type_vocab_size=0.",
        )
        expect(
            student.mlm_head.decoder.weight is student.backbone.embeddings.word_embeddings.weight,
            f"{what}: the student's MLM decoder is no longer tied to its word embeddings: copy "
            "values into the existing tensors (load_state_dict, .copy_), do not replace Parameters.",
        )
        chosen = reference.teacher_layers
        ref = dict(reference.named_parameters())
        for name, param in student.named_parameters():
            if name not in ref or not torch.equal(param, ref[name]):
                raise ExerciseError(
                    f"{what}: `{name}` is wrong — " + _layer_hint(name, student, teacher, chosen)
                )
        teacher_ptrs = {p.data_ptr() for p in teacher.parameters()}
        shared = [n for n, p in student.named_parameters() if p.data_ptr() in teacher_ptrs]
        expect(
            not shared,
            f"{what}: the student shares {shared[0] if shared else ''} with the teacher: training "
            "the student would change the teacher. Copy the values, do not assign modules.",
        )
    return "every tensor a copy, post-LN and pre-LN teachers, a one-layer student, the teacher untouched."


check_student_from_teacher = BuildCheck(
    _probe_student_from_teacher,
    fallback=init_student_from_teacher,
    fallback_name="init_student_from_teacher",
    todo="build a DistilBertForMaskedLM with the teacher's sizes, half its layers and no segment "
    "table, and copy the teacher's embeddings, chosen layers, final LayerNorm and MLM head into it.",
)


# ----- 07 · folding the segment vector -----------------------------------------------------------


def library_fold_segment(
    model: DistilBertForMaskedLM, teacher: BertForMaskedLM
) -> DistilBertForMaskedLM:
    """Add the teacher's segment vector token_type_embeddings[0] to every row of the student's
    position table, in place: each token then gets it once, as the teacher's did."""
    segment = teacher.backbone.embeddings.token_type_embeddings.weight[0]
    with torch.no_grad():
        model.backbone.embeddings.position_embeddings.weight += segment
    return model


def _probe_fold_segment(fold_segment: Callable) -> str:
    for pre_ln, what in ((True, "a pre-LN teacher"), (False, "a post-LN teacher")):
        teacher = _tiny_teacher(pre_ln, 3, seed=7)
        before = {k: v.clone() for k, v in teacher.state_dict().items()}
        student = init_student_from_teacher(teacher, [0, 1, 2]).eval()
        words = student.backbone.embeddings.word_embeddings.weight.detach().clone()
        out = _call(what, fold_segment, student, teacher)
        expect(
            out is not None,
            f"{what}: return the model (the lesson goes on with what fold_segment returns).",
        )
        expect(
            all(torch.equal(before[k], v) for k, v in teacher.state_dict().items()),
            f"{what}: the teacher's weights changed: read its segment vector, add it to the student.",
        )
        expect(
            torch.equal(out.backbone.embeddings.word_embeddings.weight, words),
            f"{what}: you changed the word embeddings. They are tied to the MLM decoder, so every "
            "logit moves; add the vector to the position table (each token gets exactly one "
            "position vector).",
        )
        batch = _distil_batch()
        ids, mask = batch["input_ids"][:2], batch["attention_mask"][:2]
        with torch.no_grad():
            want = teacher(input_ids=ids, attention_mask=mask).mlm_logits
            got = out(input_ids=ids, attention_mask=mask).mlm_logits
        if _close(got, want, atol=1e-4):
            continue
        types = teacher.backbone.embeddings.token_type_embeddings.weight
        pos = out.backbone.embeddings.position_embeddings.weight
        plain = teacher.backbone.embeddings.position_embeddings.weight
        added = (pos - plain).detach()
        if _close(added[0], types[1]):
            raise ExerciseError(
                f"{what}: you added segment row 1; the teacher was fed token_type_ids = 0, so the "
                "vector it added to every token is row 0."
            )
        if _close(added[0], types.sum(0)):
            raise ExerciseError(
                f"{what}: you added every segment row; the teacher only ever added row 0."
            )
        if _close(added, torch.zeros_like(added)):
            raise ExerciseError(
                f"{what}: the position table is unchanged: add token_type_embeddings.weight[0] "
                "to every one of its rows (in place, under torch.no_grad())."
            )
        raise ExerciseError(
            f"{what}: the folded student's logits differ from the teacher's by "
            f"{_f((got - want).abs().max()):.3g}: add the teacher's segment vector (row 0) to "
            "every row of the student's position table."
        )
    return "the full-depth copy computes the teacher's logits, post-LN and pre-LN."


check_fold_segment = BuildCheck(
    _probe_fold_segment,
    fallback=library_fold_segment,
    fallback_name="fold_segment",
    todo="add the teacher's segment vector (token_type_embeddings row 0) to every row of the "
    "student's position table, in place, and return the student.",
)


# ----- 13 · the exact posterior of an HMM, by forward-backward ------------------------------------


def library_posterior(hmm: labs_distil.HMM, x: list[int], seen: list[bool]) -> Tensor:
    """(L, V) p(x_i | the visible tokens other than x_i) for one sequence (labs.distil)."""
    tokens, visible = torch.tensor([x]), torch.tensor([seen])
    return labs_distil.exact_posterior(hmm, tokens, visible)[0]


def _posterior_variant(hmm: labs_distil.HMM, x: list[int], seen: list[bool], kind: str) -> Tensor:
    """A typical wrong forward-backward: "own" keeps position i's own emission in its answer,
    "all seen" treats masked tokens as visible."""
    if kind == "all seen":
        return library_posterior(hmm, x, [True] * len(x))
    post = library_posterior(
        hmm, x, seen
    )  # ∝ sum_k alpha beta E[k, v]; "own" weighs k by E[k, x_i] too
    tokens, visible = torch.tensor([x]), torch.tensor([seen])
    n, length = tokens.shape
    like = torch.where(
        visible[..., None], hmm.emission.T[tokens], torch.ones(1, dtype=torch.float64)
    )
    alpha = [hmm.start.expand(n, -1)]
    for t in range(length - 1):
        a = (alpha[-1] * like[:, t]) @ hmm.transition
        alpha.append(a / a.sum(-1, keepdim=True))
    beta = [torch.ones(n, hmm.states, dtype=torch.float64)]
    for t in range(length - 1, 0, -1):
        b = (like[:, t] * beta[0]) @ hmm.transition.T
        beta.insert(0, b / b.sum(-1, keepdim=True))
    state = torch.stack(alpha, 1) * torch.stack(beta, 1) * like  # (n, L, K), own emission in
    out = (state / state.sum(-1, keepdim=True)) @ hmm.emission
    return out[0] if post.shape == out[0].shape else post


def _probe_posterior(my_posterior: Callable) -> str:
    small = labs_distil.make_hmm(torch.Generator().manual_seed(4), states=3, vocab=5, home_tokens=2)
    big = labs_distil.make_hmm(torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(6)
    x6 = labs_distil.sample_hmm(small, 1, 6, g)[0].tolist()
    x12 = labs_distil.sample_hmm(big, 1, 12, g)[0].tolist()
    cases = [
        (small, x6, [True, False, True, True, False, True], "6 tokens, positions 1 and 4 masked"),
        (small, x6, [True] * 6, "6 tokens, all visible"),
        (small, x6, [False, True, True, True, True, False], "the first and the last token masked"),
        (small, x6[:1], [True], "a sequence of ONE token"),
        (small, x6, [False] * 6, "every token masked"),
        (
            big,
            x12,
            [i % 3 != 1 for i in range(12)],
            "the labs' HMM (8 states, 24 tokens), 12 tokens",
        ),
    ]
    for hmm, x, seen, what in cases:
        got = expect_tensor(_call(what, my_posterior, hmm, list(x), list(seen)), "my_posterior")
        want = library_posterior(hmm, x, seen)
        expect(
            tuple(got.shape) == tuple(want.shape),
            f"{what}: return one distribution per position, (L, V) = {tuple(want.shape)}, got "
            f"{tuple(got.shape)}.",
        )
        if _close(got, want, atol=1e-6):
            continue
        sums = got.double().sum(-1)
        expect(
            _close(sums, torch.ones_like(sums), atol=1e-6),
            f"{what}: each row must sum to 1 (normalise p at the end); yours sum to "
            f"{[round(_f(v), 4) for v in sums[:3]]}...",
        )
        variants = {
            "own": "at a visible position you used x_i itself: the answer is p(x_i | the OTHER "
            "visible tokens), so leave position i's own emission out of alpha_i * beta_i",
            "all seen": "a masked token counted as seen: a masked position contributes a factor 1 "
            "to the passes, not the emission of the token hidden there",
        }
        for kind, hint in variants.items():
            if _close(got, _posterior_variant(hmm, x, seen, kind), atol=1e-6):
                raise ExerciseError(f"{what}: {hint}.")
        i = int(((got.double() - want).abs().amax(-1) > 1e-6).nonzero()[0])
        raise ExerciseError(
            f"{what}: position {i} is {[round(_f(v), 4) for v in got[i][:4]]}..., expected "
            f"{[round(_f(v), 4) for v in want[i][:4]]}...: alpha_(t+1) = (alpha_t * like_t) @ A, "
            "beta_t = A @ (like_(t+1) * beta_(t+1)), p ∝ (alpha_i * beta_i) @ E."
        )
    return (
        "equal to forward-backward at every position: one token, all visible, all masked, 8 states."
    )


check_posterior = BuildCheck(
    _probe_posterior,
    fallback=library_posterior,
    fallback_name="distil.exact_posterior",
    todo="return (L, V): p(x_i = v | the visible tokens other than x_i) at every position, by a "
    "forward and a backward pass.",
)


# ----- 13 · which positions are masked: the labs' task generator ----------------------------------


def _probe_choose_masked(my_choose_masked: Callable) -> str:
    def draw(n: int, length: int, seed: int, rate: float, what: str) -> Tensor:
        got = expect_tensor(
            _call(
                what, my_choose_masked, n, length, torch.Generator().manual_seed(seed), rate=rate
            ),
            "my_choose_masked",
        )
        expect(
            tuple(got.shape) == (n, length),
            f"{what}: return one flag per position, shape (n, length) = {(n, length)}, got "
            f"{tuple(got.shape)}.",
        )
        expect(
            got.dtype == torch.bool,
            f"{what}: return a bool tensor (True = masked), got {got.dtype}.",
        )
        return got

    a = draw(6, 12, 1, 0.15, "n = 6, length 12")
    b = draw(6, 12, 1, 0.15, "n = 6, length 12")
    expect(
        torch.equal(a, b),
        "two calls with generators seeded alike chose different positions: draw with the "
        "generator you are given (torch.rand(..., generator=generator)), so a lab can be rerun.",
    )
    none = draw(400, 7, 2, 0.0, "rate = 0")
    per_row = none.sum(1)
    expect(
        bool((per_row >= 1).all()),
        f"rate = 0: {int((per_row == 0).sum())} of 400 rows have nothing masked. A row without a "
        "masked position gives the loss nothing: force one masked position per row.",
    )
    expect(
        bool((per_row == 1).all()),
        f"rate = 0: some rows have {int(per_row.max())} masked positions; at rate 0 only the one "
        "forced position per row is masked.",
    )
    columns = none.sum(0)
    expect(
        bool((columns > 0).all()),
        f"rate = 0: the forced position never lands on column(s) "
        f"{(columns == 0).nonzero().flatten().tolist()} of 7: choose it uniformly over all "
        "`length` positions (torch.randint's upper bound is exclusive: randint(0, length)).",
    )
    expect(
        bool(draw(5, 1, 3, 0.15, "length 1").all()),
        "length 1: the only position must be masked (the forced one).",
    )
    expect(bool(draw(5, 9, 4, 1.0, "rate = 1").all()), "rate = 1: every position is masked.")
    many = draw(4000, 12, 5, 0.15, "n = 4000, length 12, rate 0.15")
    share, want = float(many.float().mean()), 0.15 + 0.85 / 12
    if abs(share - (0.85 - 0.85 / 12 + 1 / 12)) < 0.01:
        raise ExerciseError(
            f"about {share:.0%} of the positions are masked: the comparison is the wrong way "
            "round — a position is masked when its uniform draw is BELOW the rate."
        )
    expect(
        abs(share - want) < 0.01,
        f"rate 0.15, length 12: {share:.1%} of the positions are masked, expected about "
        f"{want:.1%} (each position with probability 0.15, plus one forced position per row).",
    )
    return "~rate of the positions, at least one per row anywhere in it, reproducible with the generator."


check_choose_masked = BuildCheck(
    _probe_choose_masked,
    fallback=labs_distil.choose_masked,
    fallback_name="distil.choose_masked",
    todo="return an (n, length) bool mask: each position masked with probability `rate`, plus one "
    "forced position per row, drawn with `generator`.",
)


__all__ = [
    "check_choose_masked",
    "check_distillation_loss",
    "check_fold_segment",
    "check_posterior",
    "check_soften",
    "check_student_from_teacher",
    "library_distillation_loss",
    "library_fold_segment",
    "library_posterior",
    "library_soften",
]
