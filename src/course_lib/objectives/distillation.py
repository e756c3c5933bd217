"""Knowledge distillation (DistilBERT, Sanh et al. 2019): a student learns from a teacher's
soft predictions as well as from the masked tokens themselves.

    loss = alpha_ce * L_ce + alpha_mlm * L_mlm + alpha_cos * L_cos

L_ce   KL divergence between the teacher's and the student's distributions, both softened by a
       temperature T, times T^2 (so its gradients keep their size whatever T is: softening by T
       shrinks them by 1/T^2). Averaged over every real (non-padding) token, as the reference
       `distiller.py` does by default; `restrict_ce_to_mask=True` (its `--restrict_ce_to_mask`
       flag) averages over the masked positions only.
L_mlm  the usual masked-language-model cross-entropy against the true tokens.
L_cos  1 - cosine similarity between student and teacher last hidden states, averaged over the
       real (non-padding) tokens: it aligns the directions of the two hidden spaces.

The paper names the three terms but gives neither weights nor T. The default alphas 5/2/1 are
those of the single-GPU command in the reference README (huggingface/transformers,
examples/research_projects/distillation; its 4-GPU example uses 0.33 each); `train.py`'s own
argument defaults differ (alpha_ce 0.5, alpha_mlm 0, alpha_clm 0.5, alpha_cos 0), and T=2 is its
`--temperature` default.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.config import DistilBertConfig
from course_lib.labels import IGNORE_INDEX
from course_lib.models.bert import BertForMaskedLM, BertModel
from course_lib.models.distilbert import DistilBertForMaskedLM
from course_lib.models.inputs import check_labels
from course_lib.objectives.targets import Batch, LossAndMetrics, Shares, count_targets


def _check_same_shape(student: Tensor, teacher: Tensor, what: str, need: str) -> None:
    """Student and teacher outputs are compared position by position: refuse other shapes."""
    if student.shape != teacher.shape:
        raise ValueError(
            f"student {what} {tuple(student.shape)} and teacher {what} {tuple(teacher.shape)} "
            f"differ; {need}"
        )


def kl_distillation_loss(
    student_logits: Tensor, teacher_logits: Tensor, temperature: float
) -> Tensor:
    """T^2 * KL(softmax(teacher / T) || softmax(student / T)), averaged over rows ([n, vocab])."""
    _check_same_shape(
        student_logits, teacher_logits, "logits", "the two models need the same vocabulary."
    )
    if student_logits.shape[0] == 0:  # nothing masked: a zero that still backpropagates
        return student_logits.sum() * 0.0
    log_p_student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    log_p_teacher = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    kl = F.kl_div(log_p_student, log_p_teacher, log_target=True, reduction="batchmean")
    return kl * temperature**2


def hidden_cosine_loss(
    student_hidden: Tensor, teacher_hidden: Tensor, attention_mask: Tensor
) -> Tensor:
    """Mean of 1 - cos(student, teacher) over the real tokens (attention_mask == 1)."""
    _check_same_shape(
        student_hidden,
        teacher_hidden,
        "hidden states",
        "the cosine loss needs the same hidden_size (set alpha_cos=0 for a narrower student).",
    )
    real = attention_mask.bool()
    cos = F.cosine_similarity(student_hidden[real].float(), teacher_hidden[real].float(), dim=-1)
    return (1.0 - cos).mean()


class DistillationObjective:
    """An objective for the training engine: `objective(model, batch) -> (loss, metrics)`.

    The teacher (a course_lib MLM model, e.g. BertForMaskedLM) runs in eval mode under
    torch.no_grad, on the batch's device; the student is `model`. The batch is an MLM batch:
    input_ids, attention_mask, labels (-100 where nothing is predicted), optionally
    token_type_ids (given to the teacher; to the student only if it has segment embeddings).
    Metrics are the three unweighted terms (ce_loss, mlm_loss, cos_loss), detached.
    `restrict_ce_to_mask`: False (the reference default) distils every real token's
    distribution; True only the masked positions' (cheaper: the vocabulary projection runs on
    ~15% of the tokens).
    """

    def __init__(
        self,
        teacher: nn.Module,
        temperature: float = 2.0,
        alpha_ce: float = 5.0,
        alpha_mlm: float = 2.0,
        alpha_cos: float = 1.0,
        restrict_ce_to_mask: bool = False,
    ) -> None:
        if not temperature > 0:
            raise ValueError(f"temperature={temperature!r} is invalid: expected a positive number.")
        alphas = {"alpha_ce": alpha_ce, "alpha_mlm": alpha_mlm, "alpha_cos": alpha_cos}
        for name, value in alphas.items():
            if not value >= 0:
                raise ValueError(f"{name}={value!r} is invalid: expected a weight >= 0.")
        if not any(alphas.values()):
            raise ValueError("all loss weights are 0: give at least one of alpha_ce/mlm/cos > 0.")
        if not isinstance(restrict_ce_to_mask, bool):
            raise ValueError(
                f"restrict_ce_to_mask={restrict_ce_to_mask!r} is invalid: expected True or False."
            )
        self.teacher = teacher.eval()
        self.restrict_ce_to_mask = restrict_ce_to_mask
        self.temperature = temperature
        self.alpha_ce, self.alpha_mlm, self.alpha_cos = alpha_ce, alpha_mlm, alpha_cos

    def target_counts(self, batch: Batch) -> dict[str, float]:
        """L_mlm averages over the masked tokens ("mlm"), L_cos over the real tokens ("tokens"),
        L_ce over the real tokens, or over the masked ones if restricted: the Trainer weights
        each micro-batch's terms by its share of those counts (exact batches)."""
        return count_targets(batch)

    def __call__(
        self, model: nn.Module, batch: Batch, shares: Shares | None = None
    ) -> LossAndMetrics:
        student = getattr(model, "module", model)  # DistributedDataParallel wraps the student
        if student is self.teacher:
            raise ValueError(
                "the student and the teacher are the same module; copy the teacher first."
            )
        labels = batch.get("labels")
        if labels is None:
            raise ValueError(
                "distillation needs batch['labels'] (token ids at masked positions, -100 elsewhere): "
                "use an MLM collator."
            )
        input_ids = batch["input_ids"]
        attention_mask = batch.get("attention_mask")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        inputs = dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        teacher_inputs = dict(inputs)
        if "token_type_ids" in batch:
            teacher_inputs["token_type_ids"] = batch["token_type_ids"]
            if getattr(student.config, "type_vocab_size", 0) > 0:
                inputs["token_type_ids"] = batch["token_type_ids"]

        all_tokens = self.alpha_ce > 0 and not self.restrict_ce_to_mask
        if all_tokens:  # every position's logits are needed: run both models without labels
            for kwargs in (inputs, teacher_inputs):
                del kwargs["labels"]
        self._teacher_to(input_ids.device)
        self.teacher.eval()  # even if someone switched it back to training mode
        with torch.no_grad():
            teacher_out = self.teacher(**teacher_inputs)
        out = model(**inputs)

        masked = labels != IGNORE_INDEX
        # Each term is a mean; with shares, this micro-batch's share of the step's mean.
        mlm_share = 1.0 if shares is None else shares["mlm"]
        tokens_share = 1.0 if shares is None else shares["tokens"]
        mlm_loss = _mlm_loss(out.mlm_logits, labels) if all_tokens else out.mlm_loss
        mlm = mlm_loss * mlm_share
        metrics: dict[str, Tensor] = {"mlm_loss": mlm.detach()}
        loss = self.alpha_mlm * mlm
        if self.alpha_ce > 0:
            rows = attention_mask.bool() if all_tokens else masked
            ce_share = tokens_share if all_tokens else mlm_share
            ce = ce_share * kl_distillation_loss(
                _at_masked(out.mlm_logits, rows),
                _at_masked(teacher_out.mlm_logits, rows),
                self.temperature,
            )
            loss = loss + self.alpha_ce * ce
            metrics["ce_loss"] = ce.detach()
        if self.alpha_cos > 0:
            cos = tokens_share * hidden_cosine_loss(
                out.last_hidden_state, teacher_out.last_hidden_state, attention_mask
            )
            loss = loss + self.alpha_cos * cos
            metrics["cos_loss"] = cos.detach()
        return loss, metrics

    def _teacher_to(self, device: torch.device) -> None:
        """The engine moves the student to its device; the teacher follows on first use."""
        param = next(self.teacher.parameters(), None)
        if param is not None and param.device != device:
            self.teacher.to(device)


def _mlm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """The MLM cross-entropy from full [batch, seq, vocab] logits, as the models compute it."""
    masked = labels != IGNORE_INDEX
    targets = labels[masked]
    check_labels(targets, logits.shape[-1])  # CPU only, as in the models
    if targets.numel() == 0:  # nothing masked: a zero that still backpropagates
        return logits.sum() * 0.0
    return F.cross_entropy(logits[masked].float(), targets)


def _at_masked(logits: Tensor, masked: Tensor) -> Tensor:
    """Rows at masked positions: course_lib models already return only those when given labels."""
    return logits[masked] if logits.dim() == 3 else logits


__all__ = ["DistillationObjective", "hidden_cosine_loss", "kl_distillation_loss"]


# --- a student initialised from its teacher (DistilBERT section 3) ----------------------------


def default_student_layers(num_teacher_layers: int) -> list[int]:
    """Half the teacher's layers, spread evenly from its first to its last layer.

    For 12 layers this gives 0, 2, 4, 7, 9, 11 -- exactly the layers the reference script
    (transformers' examples/research_projects/distillation/scripts/extract_distilbert.py) takes.
    Keeping the last layer matters: the copied MLM head was trained on its output.
    """
    n, k = num_teacher_layers, max(1, num_teacher_layers // 2)
    if k == 1:
        return [0]
    return [int(i * (n - 1) / (k - 1) + 0.5) for i in range(k)]  # round half up


def init_student_from_teacher(
    teacher: BertForMaskedLM | BertModel, layers: list[int] | None = None
) -> DistilBertForMaskedLM:
    """A DistilBERT student with the teacher's sizes and a copy of its weights: word and position
    embeddings (+ their LayerNorm; the token-type table is dropped), teacher layer `layers[i]`
    as student layer i, and the MLM head (left randomly initialised if `teacher` is a BertModel).

    `student.teacher_layers` records which teacher layer each student layer came from.
    """
    backbone = getattr(teacher, "backbone", teacher)
    if not isinstance(backbone, BertModel) or backbone.config.model_type != "bert":
        raise ValueError(
            f"the teacher must be a course_lib BERT (BertModel or BertForMaskedLM), got "
            f"{type(teacher).__name__}; convert a transformers model with from_transformers first."
        )
    t_config = backbone.config
    n_teacher = t_config.num_hidden_layers
    layers = default_student_layers(n_teacher) if layers is None else list(layers)
    bad = [i for i in layers if not (isinstance(i, int) and 0 <= i < n_teacher)]
    if not layers or bad:
        raise ValueError(
            f"layers={layers} is invalid: expected a non-empty list of teacher layer indices in "
            f"[0, {n_teacher}) (the teacher has {n_teacher} layers)."
        )
    fields = {
        k: v for k, v in t_config.to_dict().items() if k not in ("model_type", "type_vocab_size")
    }
    config = DistilBertConfig(**{**fields, "num_hidden_layers": len(layers), "type_vocab_size": 0})
    student = DistilBertForMaskedLM(config)
    s_emb, t_emb = student.backbone.embeddings, backbone.embeddings
    s_emb.word_embeddings.load_state_dict(t_emb.word_embeddings.state_dict())
    s_emb.position_embeddings.load_state_dict(t_emb.position_embeddings.state_dict())
    s_emb.LayerNorm.load_state_dict(t_emb.LayerNorm.state_dict())
    for s_layer, t_index in zip(student.backbone.encoder.layers, layers):
        s_layer.load_state_dict(backbone.encoder.layers[t_index].state_dict())
    if backbone.encoder.final_norm is not None:  # pre-LN teachers end with one more LayerNorm
        student.backbone.encoder.final_norm.load_state_dict(
            backbone.encoder.final_norm.state_dict()
        )
    t_head = getattr(teacher, "mlm_head", None)
    if t_head is not None:
        for name in ("dense", "LayerNorm"):
            getattr(student.mlm_head, name).load_state_dict(getattr(t_head, name).state_dict())
        student.mlm_head.decoder.bias.data.copy_(t_head.decoder.bias.data)
    student.teacher_layers = layers
    return student
