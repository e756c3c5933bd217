"""BERT (Devlin et al. 2018), top to bottom, in the order the paper introduces it:

    embeddings      token + position + segment, summed, LayerNorm      BertEmbeddings
    self-attention  softmax(q k^T / sqrt(hs)) v in every head          MultiHeadSelfAttention
    feed-forward    H -> 4H -> GELU -> H at every position             FeedForward
    layer           each sublayer in a residual and a LayerNorm        EncoderLayer
    encoder         L layers, one after the other                      Encoder
    pooler          dense + tanh on the [CLS] vector                   Pooler
    model           embeddings -> encoder -> pooler                    BertModel
    pretraining     MLM and NSP heads and their losses                 BertForMaskedLM, ...
    fine-tuning     sequence, token and span heads                     BertForQuestionAnswering, ...

Shapes: B batch, T sequence length, C hidden size, nh heads, hs = C / nh head size, V vocabulary.
Masks are named by what they hold: `attention_mask` (B, T) is 1 at real tokens and 0 at padding
(as a tokenizer returns it); `keep_mask` is True where a query may attend to a key, (B, 1, 1, T)
for BERT's padding (broadcast over heads and queries), (B, 1, T, T) when it depends on the query
too (DeBERTa's pair mask, a causal mask in the labs).

Every other family imports these parts from here and changes only what its paper changed
(models/roberta.py, albert.py, deberta.py, distilbert.py, electra.py, modernbert.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.activations import get_activation
from course_lib.config.bert import BertConfig, EncoderConfig
from course_lib.labels import IGNORE_INDEX
from course_lib.models.base import PreTrainedEncoder
from course_lib.models.inputs import check_inputs, check_labels
from course_lib.models.outputs import ModelOutput

# --- embeddings ---------------------------------------------------------------------------------


class BertEmbeddings(nn.Module):
    """token + learned absolute position + segment, then LayerNorm and dropout.

    The three lookups are simply added: the model learns to keep the signals apart in
    different directions of the same hidden space.
    """

    def __init__(self, config: BertConfig, embedding_size: int | None = None) -> None:
        super().__init__()
        # ALBERT passes a smaller embedding_size E; BERT embeds straight into hidden_size.
        dim = embedding_size or config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, dim, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, dim)
        # DistilBERT and RoBERTa-style models with type_vocab_size=0 have no segment table.
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, dim) if config.type_vocab_size > 0 else None
        )
        self.LayerNorm = nn.LayerNorm(dim, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def position_ids(self, input_ids: Tensor) -> Tensor:
        """0, 1, 2, ... for every row; RoBERTa overrides this one method."""
        seq_len = input_ids.shape[1]
        return torch.arange(seq_len, device=input_ids.device).expand_as(input_ids)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """(B, T) ids -> (B, T, C) vectors."""
        x = self.word_embeddings(input_ids)  # (B, T, C): what each token is
        x = x + self.position_embeddings(self.position_ids(input_ids))  # where it is
        if self.token_type_embeddings is not None:  # which segment (sentence A or B) it is in
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


# --- self-attention -----------------------------------------------------------------------------


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d) + mask) V, returning the output and the attention probabilities.

    `mask` is additive ([.., 1 or q, k], 0 for keep and a very negative number for padding), so
    padded keys get probability exactly 0 after the softmax.
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if mask is not None:
        scores = scores + mask
    probs = scores.softmax(dim=-1)
    out = (dropout(probs) if dropout is not None else probs) @ value
    return out, probs


def additive_mask(keep: Tensor, dtype: torch.dtype) -> Tensor:
    """Boolean keep-mask (True = attend) -> additive mask of 0 / the most negative finite value in
    `dtype`. Built in the dtype the scores are computed in (bf16/fp16 under autocast), and finite
    rather than -inf so that a fully padded row gives uniform weights instead of NaN."""
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(
        ~keep, torch.finfo(dtype).min
    )


class MultiHeadSelfAttention(nn.Module):
    """Project to heads, attend, merge heads, project back: the sublayer of every encoder layer.

    Two paths compute the same thing: PyTorch's fused `F.scaled_dot_product_attention` (fast,
    never stores the (B, nh, T, T) probabilities) and the explicit one (`scores`, softmax, @ v),
    taken when the caller asks for the attention maps or a variant's `scores` needs more inputs.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob
        self.attn_dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, C) -> (B, nh, T, hs): each head attends over the whole sequence on its own."""
        b, s, _ = x.shape
        return x.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        """(B, nh, T, hs) queries, (B, nh, S, hs) keys -> (B, nh, T, S): how well each query
        matches each key. Divided by sqrt(hs) so the scores keep unit variance whatever the head
        size (a sum of hs products), and the softmax does not saturate. A variant that changes
        how scores are computed overrides this one method (DeBERTa adds relative positions)."""
        return q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)

    def forward(
        self,
        x: Tensor,
        keep_mask: Tensor | None = None,
        output_attentions: bool = False,
        key_value_states: Tensor | None = None,
        **score_inputs: Tensor | None,
    ) -> tuple[Tensor, Tensor | None]:
        """(B, T, C) -> (B, T, C), and the attention probabilities (B, nh, T, S) when asked for.

        `keep_mask`: boolean, True where a query may attend to a key, (B, 1, 1, S) or
        (B, 1, T, S); or an additive float mask of that shape. Keys and values come from
        `key_value_states` (B, S, C) when given (cross-attention; DeBERTa's enhanced mask decoder),
        else from x. `score_inputs` go to `scores` unchanged (BERT has none).
        """
        B, T, C = x.shape
        nh, hs = self.num_heads, self.head_dim
        kv = x if key_value_states is None else key_value_states
        # Project, then split C into nh heads of hs features: each head attends on its own.
        q = self.query(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.key(kv).view(B, -1, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        v = self.value(kv).view(B, -1, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        mask = keep_mask
        if mask is not None and mask.dtype == torch.bool:
            # True/False -> 0 / the most negative finite number, added to the scores: padded keys
            # get probability exactly 0. In the scores' dtype (bf16 under autocast); finite, not
            # -inf, so a query with no key to attend gets uniform weights instead of NaN.
            mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(
                ~mask, torch.finfo(q.dtype).min
            )
        if output_attentions or score_inputs:  # explicit: the (B, nh, T, S) map is built
            scores = self.scores(q, k, **score_inputs)  # (B, nh, T, S)
            if mask is not None:
                scores = scores + mask
            probs = scores.softmax(dim=-1)  # (B, nh, T, S): each query's weights over the keys
            context = self.attn_dropout(probs) @ v  # (B, nh, T, hs)
        else:  # fused: the same softmax(q k^T / sqrt(hs) + mask) v, the map is never stored
            drop = self.dropout_p if self.training else 0.0
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)
            probs = None
        # (B, nh, T, hs) -> (B, T, nh, hs) -> (B, T, C): the heads side by side again
        context = context.transpose(1, 2).reshape(B, T, nh * hs)
        return self.output(context), probs  # (B, T, C), (B, nh, T, S) or None


# --- feed-forward -------------------------------------------------------------------------------


class FeedForward(nn.Module):
    """hidden -> intermediate (4x wider) -> activation -> hidden, the same for every position."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = get_activation(config.hidden_act)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.act(self.up(x)))  # (B, T, C) -> (B, T, 4C) -> (B, T, C)


# --- one layer, and the stack -------------------------------------------------------------------


class EncoderLayer(nn.Module):
    """Post-LN as in BERT: x = LN(x + Sublayer(x)). Pre-LN (x = x + Sublayer(LN(x))) is an option
    because it trains stably with the short, high-learning-rate schedules a CPU budget needs."""

    # The attention sublayer; DeBERTa's layer names its disentangled attention here.
    attention_class: type[nn.Module] = MultiHeadSelfAttention

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = self.attention_class(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.pre_layer_norm = config.pre_layer_norm

    def forward(
        self,
        x: Tensor,
        keep_mask: Tensor | None = None,
        output_attentions: bool = False,
        **attention_inputs: Tensor | None,
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, C) -> (B, T, C), and the attention probabilities when asked for.
        `attention_inputs` go unchanged to the attention sublayer (BERT has none)."""
        if self.pre_layer_norm:
            attn, probs = self.attention(
                self.attention_norm(x), keep_mask, output_attentions, **attention_inputs
            )
            x = x + self.dropout(attn)
            return x + self.dropout(self.feed_forward(self.output_norm(x))), probs
        attn, probs = self.attention(x, keep_mask, output_attentions, **attention_inputs)
        x = self.attention_norm(x + self.dropout(attn))  # (B, T, C)
        return self.output_norm(x + self.dropout(self.feed_forward(x))), probs


class Encoder(nn.Module):
    """L layers applied one after the other; collects hidden states and attention maps when asked.

    `keep_mask` enters here, once for all layers: (B, 1, 1, T) from BertModel (True at real
    tokens), or any boolean mask broadcastable to (B, nh, T, T).
    """

    layer_class: type[nn.Module] = EncoderLayer  # DeBERTa's encoder names its layer here

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(self.build_layers(config))
        # Pre-LN leaves the residual stream un-normalised, so it needs one LayerNorm at the end;
        # post-LN (BERT) already ends every layer with one.
        self.final_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
            if config.pre_layer_norm
            else None
        )

    def build_layers(self, config: BertConfig) -> list[nn.Module]:
        """The layers the forward pass applies, in order: one `layer_class` per layer (ALBERT's
        encoder puts the same layer object in several places instead)."""
        return [self.layer_class(config) for _ in range(config.num_hidden_layers)]

    def forward(
        self,
        x: Tensor,
        keep_mask: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        **layer_inputs: Tensor | None,
    ) -> tuple[Tensor, tuple[Tensor, ...] | None, tuple[Tensor, ...] | None]:
        """x (B, T, C) -> (last hidden state, all hidden states (L + 1) or None, attention maps (L)
        or None). `layer_inputs` go to every layer unchanged (DeBERTa: the relative positions)."""
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, probs = layer(x, keep_mask, output_attentions, **layer_inputs)  # (B, T, C)
            if hidden_states is not None:
                hidden_states.append(x)
            if attentions is not None:
                attentions.append(probs)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (
            x,
            tuple(hidden_states) if hidden_states is not None else None,
            tuple(attentions) if attentions is not None else None,
        )


# --- the model ----------------------------------------------------------------------------------


class Pooler(nn.Module):
    """dense + tanh on the [CLS] vector: BERT's sentence representation for NSP and classification."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.dense(hidden[:, 0]).tanh()  # (B, T, C) -> (B, C)


class BertModel(PreTrainedEncoder):
    """embeddings -> encoder stack -> (pooler). Returns last_hidden_state and pooler_output.

    A variant swaps a part by naming its class here (RoBERTa: `embeddings_class`)."""

    embeddings_class: type[nn.Module] = BertEmbeddings
    encoder_class: type[nn.Module] = Encoder
    pooler_class: type[nn.Module] = Pooler

    def __init__(self, config: EncoderConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = self.embeddings_class(config)
        self.encoder = self.encoder_class(config)
        self.pooler = self.pooler_class(config) if add_pooling_layer else None
        self.init_weights()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """input_ids (B, T); attention_mask (B, T), 1 at real tokens, 0 at padding."""
        check_inputs(self.config, input_ids, attention_mask, token_type_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, C)
        # (B, 1, 1, T): every query may attend to the real keys; broadcast over heads and queries
        keep_mask = attention_mask[:, None, None, :].bool()
        x, hidden_states, attentions = self.encoder(
            x, keep_mask, output_attentions, output_hidden_states
        )
        return ModelOutput(
            last_hidden_state=x,  # (B, T, C)
            pooler_output=self.pooler(x) if self.pooler is not None else None,  # (B, C)
            hidden_states=hidden_states,
            attentions=attentions,
        )


# --- pretraining: the heads and their losses ----------------------------------------------------


class MaskedLMHead(nn.Module):
    """transform (dense, activation, LayerNorm) then a vocabulary projection whose weight is the
    token embedding matrix (tied: the same tensor reads words in and writes them out) plus a bias."""

    def __init__(
        self,
        config: BertConfig,
        embedding_size: int | None = None,
        activation: str | None = None,
    ) -> None:
        super().__init__()
        dim = embedding_size or config.hidden_size  # ALBERT predicts from its smaller E
        self.dense = nn.Linear(config.hidden_size, dim)
        self.act = get_activation(activation or config.hidden_act)  # RoBERTa: always "gelu"
        self.LayerNorm = nn.LayerNorm(dim, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(dim, config.vocab_size)  # weight tied by the model

    def forward(self, hidden: Tensor) -> Tensor:
        return self.decoder(self.LayerNorm(self.act(self.dense(hidden))))  # (..., C) -> (..., V)


def masked_lm_loss(
    head: nn.Module, hidden: Tensor, labels: Tensor | None
) -> tuple[Tensor | None, Tensor, Tensor | None]:
    """Vocabulary logits, and the loss when labels are given.

    With labels, only the ~15% masked positions are gathered *before* the head: the
    vocabulary projection is the largest matmul in a small model, and the loss ignores every
    other position anyway. Returns (loss, logits, positions): logits (n_masked, V) at the
    positions (n_masked, 2) (batch and sequence index) with labels; (B, T, V) and None without.
    """
    if labels is None:
        return None, head(hidden), None
    if labels.shape != hidden.shape[:2]:
        raise ValueError(
            f"labels has shape {tuple(labels.shape)}, expected {tuple(hidden.shape[:2])} "
            f"(one label per token, -100 where no prediction is wanted)."
        )
    selected = labels != IGNORE_INDEX  # (B, T)
    logits = head(hidden[selected])  # (n_masked, V)
    targets = labels[selected]  # (n_masked,)
    check_labels(targets, logits.shape[-1])  # CPU only: no device sync on the hot path
    if targets.numel() == 0:  # nothing masked in this batch: a zero loss that still backpropagates
        return logits.sum() * 0.0, logits, selected.nonzero()
    return F.cross_entropy(logits.float(), targets), logits, selected.nonzero()


class NextSentenceHead(nn.Module):
    """Two logits from the pooled [CLS]: 0 = B follows A, 1 = B is random (transformers' order)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: Tensor) -> Tensor:
        return self.classifier(pooled)  # (B, C) -> (B, 2)


def sentence_pair_loss(logits: Tensor, labels: Tensor | None) -> Tensor | None:
    """Cross-entropy of a two-way sentence-pair head (NSP or SOP), None without labels."""
    return None if labels is None else F.cross_entropy(logits.float(), labels.view(-1))


def total_loss(*losses: Tensor | None) -> Tensor | None:
    """The sum of the losses that were computed (None when none was)."""
    losses = [x for x in losses if x is not None]
    return sum(losses) if losses else None


class TaskModel(PreTrainedEncoder):
    """What every task model shares: a backbone (`base_model_class`, with or without its pooler),
    weight initialisation, and the MLM decoder tied to the token embeddings.

    Each task below builds its head(s) in `__init__`, then calls `post_init`; its `forward` names
    its inputs and targets and reads backbone -> head -> loss. A variant's task class names its
    own parts in its body (`base_model_class`, `mlm_head_class`, `classifier_class`, ...).
    """

    base_model_class: type[BertModel] = BertModel
    add_pooling_layer: bool = False

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self.backbone = self.base_model_class(config, add_pooling_layer=self.add_pooling_layer)

    def post_init(self) -> None:
        """Initialise every weight (backbone and heads), then tie the MLM decoder."""
        self.init_weights()
        self.tie_weights()

    def tie_weights(self) -> None:
        """The MLM decoder reads out with the input embedding matrix (saves V x H parameters);
        a task without an MLM head has nothing to tie."""
        if "mlm_head" in self._modules:
            self.mlm_head.decoder.weight = self.backbone.embeddings.word_embeddings.weight


class BertForMaskedLM(TaskModel):
    """BERT with the masked-language-model head (no pooler, as in transformers)."""

    mlm_head_class: type[nn.Module] = MaskedLMHead

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self.mlm_head = self.mlm_head_class(config)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """labels (B, T): the original token at masked positions, -100 elsewhere. Adds
        `mlm_logits` (see masked_lm_loss) and, with labels, `mlm_loss` (= `loss`)."""
        out = self.backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        loss, logits, positions = masked_lm_loss(self.mlm_head, out.last_hidden_state, labels)
        return replace(out, loss=loss, mlm_loss=loss, mlm_logits=logits, mlm_positions=positions)


class BertForPreTraining(TaskModel):
    """BERT's two pretraining objectives at once: MLM on tokens and NSP on the pooled [CLS]."""

    add_pooling_layer = True
    mlm_head_class: type[nn.Module] = MaskedLMHead

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.mlm_head = self.mlm_head_class(config)
        self.nsp_head = NextSentenceHead(config)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        next_sentence_label: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """labels (B, T) as BertForMaskedLM; next_sentence_label (B,): 0 = B follows A, 1 =
        random B. `loss` is the sum of the losses whose targets were given."""
        out = self.backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        mlm_loss, mlm_logits, positions = masked_lm_loss(
            self.mlm_head, out.last_hidden_state, labels
        )
        nsp_logits = self.nsp_head(out.pooler_output)  # (B, 2)
        nsp_loss = sentence_pair_loss(nsp_logits, next_sentence_label)
        return replace(
            out,
            loss=total_loss(mlm_loss, nsp_loss),
            mlm_loss=mlm_loss,
            mlm_logits=mlm_logits,
            mlm_positions=positions,
            nsp_loss=nsp_loss,
            nsp_logits=nsp_logits,
        )


# --- fine-tuning: one head and one task model per kind of prediction ----------------------------


class SequenceClassificationHead(nn.Module):
    """dropout + linear on the pooled [CLS] vector: one prediction per sequence. `dropout`
    defaults to hidden_dropout_prob (ALBERT and RoBERTa pass their classifier_dropout_prob)."""

    def __init__(self, config: BertConfig, dropout: float | None = None) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout_prob if dropout is None else dropout)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, pooled: Tensor) -> Tensor:
        return self.out_proj(self.dropout(pooled))  # (B, C) -> (B, num_labels)


class TokenClassificationHead(SequenceClassificationHead):
    """The same dropout + linear, applied at every position: one prediction per token."""


class QuestionAnsweringHead(nn.Module):
    """Two logits per token: how likely the answer span starts / ends there."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.qa_outputs = nn.Linear(config.hidden_size, 2)

    def forward(self, hidden: Tensor) -> tuple[Tensor, Tensor]:
        start, end = self.qa_outputs(hidden).unbind(dim=-1)  # (B, T) each
        return start, end


class BertForSequenceClassification(TaskModel):
    """One label per sequence; num_labels=1 means regression (MSE). The head reads the pooled
    [CLS]; a variant without a pooler (add_pooling_layer=False) gives its head the token
    vectors, and the head picks the first one itself."""

    add_pooling_layer = True
    classifier_class: type[nn.Module] = SequenceClassificationHead

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.classifier = self.classifier_class(config)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """labels (B,): class indices, or target values when num_labels == 1."""
        out = self.backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        pooled = out.pooler_output if self.add_pooling_layer else out.last_hidden_state
        logits = self.classifier(pooled)  # (B, num_labels)
        loss = None
        if labels is not None and self.config.num_labels == 1:
            loss = F.mse_loss(logits.squeeze(-1).float(), labels.float())
        elif labels is not None:
            loss = F.cross_entropy(logits.float(), labels.view(-1))
        return replace(out, loss=loss, logits=logits)


class BertForTokenClassification(TaskModel):
    """One label per token (tagging); labels of -100 are ignored (padding, sub-word pieces)."""

    classifier_class: type[nn.Module] = TokenClassificationHead

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.classifier = self.classifier_class(config)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """labels (B, T): a class index per token, -100 where none is wanted."""
        out = self.backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        logits = self.classifier(out.last_hidden_state)  # (B, T, num_labels)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
        return replace(out, loss=loss, logits=logits)


class BertForQuestionAnswering(TaskModel):
    """Extractive QA: start and end logits over the tokens of [CLS] question [SEP] context [SEP].
    Targets: `start_positions` and `end_positions` (token indices), not `labels`."""

    qa_head_class: type[nn.Module] = QuestionAnsweringHead

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.qa_head = self.qa_head_class(config)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        start_positions: Tensor | None = None,
        end_positions: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        labels: None = None,
    ) -> ModelOutput:
        """start_positions, end_positions (B,): the answer's first and last token. `labels` is
        taken only to say, in one line, that QA's targets are these two."""
        if labels is not None:
            raise ValueError(
                "question answering takes start_positions and end_positions, not labels."
            )
        out = self.backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        start_logits, end_logits = self.qa_head(out.last_hidden_state)  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            # Positions outside the sequence (answer truncated away) are ignored, as in transformers.
            seq_len = out.last_hidden_state.shape[1]
            start = start_positions.clamp(0, seq_len)
            end = end_positions.clamp(0, seq_len)
            loss = (
                F.cross_entropy(start_logits.float(), start, ignore_index=seq_len)
                + F.cross_entropy(end_logits.float(), end, ignore_index=seq_len)
            ) / 2
        return replace(out, loss=loss, start_logits=start_logits, end_logits=end_logits)
