"""Chapter 04 (DistilBERT) exercise checkers: the temperature-scaled KL term, the hidden-state
cosine term, which teacher layers a student keeps, and copying them into the student."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.config import BertConfig, tiny_config
from course_lib.exercises.core import ExerciseError, expect, expect_tensor, passed, run_learner_code
from course_lib.models.bert import BertForMaskedLM
from course_lib.models.distilbert import (
    DistilBertForMaskedLM,
    default_student_layers,
    init_student_from_teacher,
)
from course_lib.objectives.distillation import hidden_cosine_loss, kl_distillation_loss


def _close(a: Tensor, b: Tensor, rel: float = 1e-4) -> bool:
    return bool(torch.allclose(a.detach().float(), b.detach().float(), rtol=rel, atol=1e-6))


def _as_scalar(value: object, name: str) -> Tensor:
    value = expect_tensor(value, name)
    expect(
        value.dim() == 0,
        f"`{name}` must return a scalar (0-dim) tensor, got shape {tuple(value.shape)}.",
    )
    return value


def check_distillation_kl(distillation_kl: Callable) -> None:
    """`distillation_kl(student_logits, teacher_logits, temperature)` -> T^2 x KL(p_teacher || p_student)
    with both distributions softened by T, averaged over the rows ([n, vocab] logits)."""
    g = torch.Generator().manual_seed(11)
    n, vocab = 6, 40
    student, teacher = (
        torch.randn(n, vocab, generator=g) * 3,
        torch.randn(n, vocab, generator=g) * 3,
    )
    for t in (2.0, 4.0, 1.0):
        x = student.clone().requires_grad_()
        got = _as_scalar(
            run_learner_code(distillation_kl, x, teacher.clone(), t), "distillation_kl"
        )
        ref = kl_distillation_loss(student, teacher, t)
        if _close(got, ref):
            expect(
                got.requires_grad,
                "the loss must stay differentiable: do not call .item() or "
                "detach the student's logits (the student learns through this term).",
            )
            got.backward()
            y = student.clone().requires_grad_()
            kl_distillation_loss(y, teacher, t).backward()
            expect(
                _close(x.grad, y.grad),
                "the value is right but its gradient is not: compute "
                "it with torch operations on the student's logits only (the teacher is a constant).",
            )
            continue
        _diagnose_kl(got, student, teacher, t, n, vocab)
    same = run_learner_code(distillation_kl, teacher.clone(), teacher.clone(), 2.0)
    expect(abs(float(same)) < 1e-5, f"identical logits must give 0, got {float(same):.3g}.")
    passed("T^2 x KL(teacher || student) at T = 1, 2 and 4, value and gradient.")


def _kl(p_logits: Tensor, q_logits: Tensor) -> Tensor:
    """KL(softmax(p) || softmax(q)) per row."""
    log_p, log_q = F.log_softmax(p_logits, -1), F.log_softmax(q_logits, -1)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def _diagnose_kl(got: Tensor, s: Tensor, t_logits: Tensor, t: float, n: int, vocab: int) -> None:
    """Name the typical mistake that produced `got` (checked against the T where they differ)."""
    rows = _kl(t_logits / t, s / t)
    kl_div_on_probs = F.kl_div(
        F.softmax(s / t, -1), F.softmax(t_logits / t, -1), reduction="batchmean"
    )
    candidates = {
        "F.kl_div takes the student's LOG-probabilities as its first argument (log_softmax), and "
        "the teacher's probabilities as its second": kl_div_on_probs * t**2,
        f"missing the T^2 factor: at T={t:g} your value is the KL alone. Multiply by "
        "temperature**2 so the gradients keep their size whatever T is": rows.mean(),
        "the KL is the wrong way round: the teacher's distribution is the target, "
        "KL(p_teacher || p_student) = sum p_teacher * (log p_teacher - log p_student)": _kl(
            s / t, t_logits / t
        ).mean()
        * t**2,
        f"the temperature is not applied inside the softmax: divide BOTH logits by T={t:g} "
        "before the (log-)softmax": _kl(t_logits, s).mean() * t**2,
        "only the student's logits are divided by T: soften the teacher's too (the same T for both)": _kl(
            t_logits, s / t
        ).mean()
        * t**2,
        "only the teacher's logits are divided by T: soften the student's too (the same T for both)": _kl(
            t_logits / t, s
        ).mean()
        * t**2,
        f"the factor is T, not T^2: at T={t:g} multiply the KL by temperature**2": rows.mean() * t,
        f"the factor is T^3, not T^2: at T={t:g} multiply the KL by temperature**2": rows.mean()
        * t**3,
        "that is the cross-entropy with the teacher's soft targets: the KL plus the teacher's "
        "entropy (same gradient, larger value). Return the KL, sum p_teacher * (log p_teacher - "
        "log p_student)": -(F.softmax(t_logits / t, -1) * F.log_softmax(s / t, -1)).sum(-1).mean()
        * t**2,
        f"you sum over the {n} rows: average over them instead (reduction='batchmean')": rows.sum()
        * t**2,
        f"you average over rows AND the {vocab} vocabulary entries (reduction='mean'): average "
        "over rows only, summing over the vocabulary (reduction='batchmean')": rows.mean()
        * t**2
        / vocab,
    }
    for message, value in candidates.items():
        if _close(got, value):
            raise ExerciseError(message + ".")
    ref = rows.mean() * t**2
    raise ExerciseError(
        f"at T={t:g} you return {float(got.detach()):.5f}, expected {float(ref):.5f} = T^2 x mean over rows of "
        "KL(softmax(teacher/T) || softmax(student/T))."
    )


def check_hidden_cosine(cosine_loss: Callable) -> None:
    """`cosine_loss(student_hidden, teacher_hidden, attention_mask)` -> mean of 1 - cos over the
    real tokens (attention_mask == 1), the cosine taken over the hidden dimension."""
    g = torch.Generator().manual_seed(5)
    batch, seq, hidden = 3, 7, 6
    s, t = (
        torch.randn(batch, seq, hidden, generator=g),
        torch.randn(batch, seq, hidden, generator=g),
    )
    s[:, :, 0] += 1.0  # some shared direction, so the cosines are not all near 0
    t[:, :, 0] += 1.0
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, 4:] = 0  # sentences of different lengths: padding differs per row
    mask[2, 2:] = 0
    got = _as_scalar(
        run_learner_code(cosine_loss, s.clone(), t.clone(), mask.clone()), "cosine_loss"
    )
    ref = hidden_cosine_loss(s, t, mask)
    if not _close(got, ref):
        cos = F.cosine_similarity(s, t, dim=-1)
        real = mask.bool()
        per_row = torch.stack([(1 - cos[i][real[i]]).mean() for i in range(batch)])
        candidates = {
            "padding positions are counted: keep only the tokens where attention_mask == 1": (
                1 - cos
            ).mean(),
            "the padding's zeros still count in the mean: ((1 - cos) * mask).mean() divides by "
            "every position; divide the masked sum by the number of real tokens (mask.sum())": (
                (1 - cos) * mask
            ).mean(),
            "a loss must be 0 when the directions agree: return 1 - cos, not cos": cos[real].mean(),
            "this is a mean of per-sentence means: average over all real tokens at once, so "
            "every token counts the same whatever its sentence's length": per_row.mean(),
            "you sum over the real tokens: take the mean (divide by their number)": (1 - cos)[
                real
            ].sum(),
            "the cosine is taken over the wrong dimension: compare hidden vectors, i.e. over the "
            "last dimension (dim=-1)": (1 - F.cosine_similarity(s, t, dim=1)).mean(),
        }
        for message, value in candidates.items():
            if _close(got, value):
                raise ExerciseError(message + ".")
        raise ExerciseError(
            f"you return {float(got.detach()):.5f}, expected {float(ref):.5f} = mean over real tokens of "
            "1 - cos(student, teacher), the cosine over the hidden dimension (dim=-1)."
        )
    same = run_learner_code(cosine_loss, s.clone(), s * 3.0, mask.clone())
    expect(
        abs(float(same)) < 1e-5,
        "vectors that point the same way (one is 3x the other) must "
        f"give 0: the cosine ignores length. Got {float(same):.3g}.",
    )
    passed("1 - cos over the hidden dimension, averaged over real tokens only.")


def check_student_layers(choose_layers: Callable) -> None:
    """`choose_layers(num_teacher_layers)` -> the teacher layers a half-depth student copies,
    spread evenly from the first to the last (12 layers: 0, 2, 4, 7, 9, 11)."""
    for n in (12, 4, 6, 8, 24):
        expected = default_student_layers(n)
        got = run_learner_code(choose_layers, n)
        expect(
            isinstance(got, (list, tuple)),
            f"return a list of layer indices, got {type(got).__name__}.",
        )
        try:
            got = [int(i) for i in got]
        except (TypeError, ValueError):
            raise ExerciseError(
                f"return a flat list of layer indices (ints), got {got!r}."
            ) from None
        if got == expected:
            continue
        expect(
            len(got) == len(expected),
            f"for {n} teacher layers the student has half as many "
            f"({n} // 2 = {len(expected)}), you return {len(got)}: {got}.",
        )
        expect(
            got[0] == 0,
            f"for {n} layers you return {got}: keep the first layer (index 0), "
            "right after the copied embeddings it was trained with.",
        )
        expect(
            got[-1] == n - 1,
            f"for {n} layers you return {got}: keep the LAST layer "
            f"(index {n - 1}) - the copied MLM head was trained on its output.",
        )
        k = len(expected)
        if got == [round(i * (n - 1) / (k - 1)) for i in range(k)]:
            raise ExerciseError(
                f"for {n} layers you return {got}, expected {expected}: Python's round() sends "
                "halves to the even neighbour (2.5 -> 2); round halves UP, int(x + 0.5)."
            )
        raise ExerciseError(
            f"for {n} layers you return {got}, expected {expected}: spread them evenly, layer "
            f"i * (n - 1) / (k - 1) rounded to the nearest (half up), for i = 0 .. k - 1."
        )
    passed(
        "0, 2, 4, 7, 9, 11 for a 12-layer teacher, as in the reference extraction script, and "
        "the same rule at 4, 6, 8 and 24 layers."
    )


def _tiny_teacher(pre_layer_norm: bool, seed: int) -> BertForMaskedLM:
    torch.manual_seed(seed)
    # Six layers for a student to choose from; no dropout (the teacher only runs in eval mode).
    config = tiny_config(BertConfig, 50, 16, layers=6, heads=2, max_positions=20)
    teacher = BertForMaskedLM(config.replace(intermediate_size=32, pre_layer_norm=pre_layer_norm))
    with torch.no_grad():  # LayerNorms and biases start at 1 / 0: make every tensor distinctive
        for p in teacher.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return teacher.eval()


def _hint(
    name: str, student: DistilBertForMaskedLM, teacher: BertForMaskedLM, layers: list[int]
) -> str:
    """Why parameter `name` of the student is not what it should be."""
    if name.startswith("backbone.encoder.layers."):
        i = int(name.split(".")[3])
        rest = name.split(".", 4)[4]
        got = student.get_parameter(name)
        same = [
            j
            for j, layer in enumerate(teacher.backbone.encoder.layers)
            if torch.equal(layer.get_parameter(rest), got)
        ]
        if same:
            return (
                f"student layer {i} holds teacher layer {same[0]}, expected teacher layer "
                f"{layers[i]} (student layer i copies teacher layer layers[i])."
            )
        return f"student layer {i} ({rest}) is not a copy of teacher layer {layers[i]}."
    if name.startswith("backbone.embeddings.word_embeddings"):
        return "copy the word embeddings (the MLM decoder shares them: one copy covers both)."
    if name.startswith("backbone.embeddings.position_embeddings"):
        return "copy the position embeddings."
    if name.startswith("backbone.embeddings.LayerNorm"):
        return "copy the LayerNorm that follows the embeddings."
    if name.startswith("backbone.encoder.final_norm"):
        return "a pre-LN teacher ends with one more LayerNorm (encoder.final_norm): copy it too."
    if name.startswith("mlm_head"):
        return (
            "copy the MLM head too (mlm_head.dense, mlm_head.LayerNorm and the decoder's bias): "
            "the student then starts predicting tokens as the teacher does."
        )
    return f"{name} differs from the teacher's."


def check_copy_teacher(copy_teacher_weights: Callable) -> None:
    """`copy_teacher_weights(teacher, student, layers)` copies, in place, the teacher's embeddings,
    teacher layer layers[i] into student layer i, the final LayerNorm (pre-LN) and the MLM head."""
    for pre_ln, layers in ((False, [0, 2, 3, 5]), (True, [1, 4, 5])):
        teacher = _tiny_teacher(pre_ln, seed=3)
        before = {k: v.clone() for k, v in teacher.state_dict().items()}
        reference = init_student_from_teacher(teacher, layers)
        torch.manual_seed(99)
        student = DistilBertForMaskedLM(reference.config)
        out = run_learner_code(copy_teacher_weights, teacher, student, list(layers))
        if out is not None:
            expect(
                out is student, "modify `student` in place (return nothing or the same student)."
            )
        after = teacher.state_dict()
        expect(
            all(torch.equal(before[k], after[k]) for k in before),
            "the teacher's weights changed: copy FROM the teacher into the student, not the other way.",
        )
        expect(
            student.mlm_head.decoder.weight is student.backbone.embeddings.word_embeddings.weight,
            "the student's MLM decoder must stay tied to its word embeddings: copy values into "
            "the existing tensors instead of replacing the Parameter.",
        )
        ref_params = dict(reference.named_parameters())
        for name, param in student.named_parameters():
            if not torch.equal(param, ref_params[name]):
                raise ExerciseError(
                    f"{'pre-LN' if pre_ln else 'post-LN'} teacher, layers={layers}: "
                    f"`{name}` is wrong - " + _hint(name, student, teacher, layers)
                )
        teacher_ptrs = {p.data_ptr() for p in teacher.parameters()}
        shared = [n for n, p in student.named_parameters() if p.data_ptr() in teacher_ptrs]
        if shared:
            raise ExerciseError(
                f"the student shares tensors with the teacher ({shared[0]} and more): training "
                "the student would change the teacher. Copy the values (load_state_dict or "
                ".data.copy_), do not assign the teacher's Parameters or modules."
            )
    passed(
        "embeddings, the chosen layers, the final LayerNorm and the MLM head copied, "
        "post-LN and pre-LN, with the teacher untouched and nothing shared."
    )


__all__ = [
    "check_copy_teacher",
    "check_distillation_kl",
    "check_hidden_cosine",
    "check_student_layers",
]
