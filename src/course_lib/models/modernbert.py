"""ModernBERT (Warner et al. 2024) as a diff from BERT.

    BERT                                     ModernBERT
    token + learned position + segment       token embeddings only, then LayerNorm
    LayerNorm, Linear with biases            no biases anywhere (LayerNorm scale only)
    post-LN: x = LN(x + sublayer(x))         pre-LN: x = x + sublayer(LN(x)), a final LN
    q, k, v, out: four H x H projections     one fused H -> 3H projection (Wqkv), and out
    positions added once, at the input       rotary: q and k turned by position in every layer
    every layer attends to all tokens        every 3rd layer global (theta 160k); the others
                                             local, |i - j| <= 64 (theta 10k)
    FFN: H -> 4H -> GELU -> H                GeGLU: H -> 2 x 1.5H, GELU(a) * b -> H
    pooler dense + tanh                      no pooler
    N(0, 0.02) init                          truncated normal; out projections / sqrt(2L)
    -                                        unpadding: only real tokens go through the layers

The task model, the MLM loss (gathered at masked positions) and the tied decoder are BERT's:
`ModernBertModel` swaps `embeddings_class` and `encoder_class`, `ModernBertForMaskedLM` swaps
`base_model_class` and `mlm_head_class`, as ALBERT does. The encoder is ModernBERT's own
(`ModernBertEncoder`): its loop packs the real tokens before the first layer and puts them back
after the final norm, which BERT's loop has no reason to know about.

Masks: BertModel's forward hands the encoder keep_mask (B, 1, 1, T); the encoder reads it as
`token_mask` (B, T), True at real tokens, which the layers take (or None once the real tokens
are packed: then there is no padding left to mask).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.activations import get_activation
from course_lib.config.modernbert import ModernBertConfig
from course_lib.models.bert import (
    BertForMaskedLM,
    BertModel,
    additive_mask,
    scaled_dot_product_attention,
)
from course_lib.modules.local_attention import sliding_window_attention, sliding_window_mask
from course_lib.modules.rotary import RotaryEmbedding, apply_rotary
from course_lib.modules.unpadding import Packing, pack


def _norm(config: ModernBertConfig) -> nn.LayerNorm:
    return nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)


class ModernBertEmbeddings(nn.Module):
    """BERT's embeddings without the position and segment tables: token lookup, norm, dropout."""

    def __init__(self, config: ModernBertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.norm = _norm(config)
        self.dropout = nn.Dropout(config.embedding_dropout)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """(B, T) ids -> (B, T, C). token_type_ids: check_inputs allows only zeros."""
        return self.dropout(self.norm(self.word_embeddings(input_ids)))


class GatedFeedForward(nn.Module):
    """GeGLU (Shazeer 2020): H -> 2I, split into a and b, GELU(a) * b, I -> H.

    The gate b lets each of the I features be switched per token; with I = 1.5H the two
    matrices hold 4.5 H^2 weights, a little more than BERT's 4H FFN with 8 H^2.
    """

    def __init__(self, config: ModernBertConfig) -> None:
        super().__init__()
        inter = config.intermediate_size
        self.up = nn.Linear(config.hidden_size, 2 * inter, bias=config.mlp_bias)  # transformers: Wi
        self.down = nn.Linear(inter, config.hidden_size, bias=config.mlp_bias)  # transformers: Wo
        self.act = get_activation(config.hidden_activation)
        self.dropout = nn.Dropout(config.mlp_dropout)

    def forward(self, x: Tensor) -> Tensor:
        a, b = self.up(x).chunk(2, dim=-1)  # (..., I) each
        return self.down(self.dropout(self.act(a) * b))  # (..., C)


class RotarySelfAttention(nn.Module):
    """BERT's multi-head attention with one fused qkv projection, no biases, rotary positions,
    and (in local layers) a sliding window of |i - j| <= local_attention // 2."""

    # Local layers compute their band block-wise once T > blockwise_from * w. It does 3w scores
    # per query instead of T, but its einsums are slower per score than fused SDPA: on a
    # 2-core CPU (w = 64) it wins from about 600 tokens (chapter 05, notebook 04). Shorter
    # sequences use SDPA with the band as a mask. Both give the same output.
    blockwise_from: int = 8

    def __init__(self, config: ModernBertConfig, layer: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        h = config.hidden_size
        self.qkv = nn.Linear(h, 3 * h, bias=config.attention_bias)  # transformers: Wqkv
        self.output = nn.Linear(h, h, bias=config.attention_bias)  # transformers: Wo
        self.is_global = config.is_global(layer)
        self.half_window = None if self.is_global else config.local_attention // 2
        theta = config.global_rope_theta if self.is_global else config.local_rope_theta
        self.rotary = RotaryEmbedding(self.head_dim, theta)
        self.dropout_p = config.attention_dropout
        self.attn_dropout = nn.Dropout(config.attention_dropout)
        self.output_dropout = nn.Dropout(config.attention_dropout)

    def forward(
        self,
        x: Tensor,
        positions: Tensor,
        token_mask: Tensor | None = None,
        packing: Packing | None = None,
        output_attentions: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, C) with token_mask (B, T), or packed (N, C) with `packing`; positions (T,)
        or (N,). Returns the same shape as x, and the probabilities (B, nh, T, T) if asked."""
        q, k, v = self.qkv(x).unflatten(-1, (3, self.num_heads, self.head_dim)).unbind(-3)
        cos, sin = self.rotary(positions)  # (T, hs) or (N, hs)
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)  # one angle per position, for all heads
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)  # (B, T, nh, hs) or (N, nh, hs)
        if packing is None:
            heads = (t.transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
            context, probs = self.attend(*heads, token_mask, output_attentions)
            context = context.transpose(1, 2).flatten(2)  # (B, T, C)
        else:  # one sequence at a time: what flash-attention's varlen kernel does in one call
            pieces, maps = [], []
            for start, end in zip(packing.cu_seqlens[:-1], packing.cu_seqlens[1:]):
                if start == end:
                    maps.append(None)
                    continue
                one = (t[start:end].transpose(0, 1)[None] for t in (q, k, v))  # (1, nh, n, hs)
                ctx, p = self.attend(*one, None, output_attentions)
                pieces.append(ctx[0].transpose(0, 1).flatten(1))  # (n, C)
                maps.append(p)
            context = torch.cat(pieces)  # (N, C)
            probs = packing.unpack_attention(maps) if output_attentions else None
        return self.output_dropout(self.output(context)), probs

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, token_mask: Tensor | None, output_attentions: bool
    ) -> tuple[Tensor, Tensor | None]:
        """q, k, v (B, nh, T, hs), token_mask (B, T) (True at real tokens) or None -> context
        (B, nh, T, hs), probabilities."""
        t, w = q.shape[2], self.half_window
        if w is not None and w >= t - 1:
            w = None  # the window reaches every token: this is global attention
        drop = self.dropout_p if self.training else 0.0
        if w is not None and t > self.blockwise_from * w and not output_attentions:
            # block-wise: 3w scores per query instead of T
            return sliding_window_attention(q, k, v, token_mask, w, drop), None
        allowed = None if token_mask is None else token_mask[:, None, None, :]  # (B, 1, 1, T)
        if w is not None:
            band = sliding_window_mask(t, w, q.device)  # (T, T)
            allowed = band if allowed is None else allowed & band  # (B, 1, T, T)
        mask = None if allowed is None else additive_mask(allowed, q.dtype)
        if output_attentions:  # explicit path: the (B, nh, T, T) probabilities are returned
            return scaled_dot_product_attention(q, k, v, mask, self.attn_dropout)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop), None


class ModernBertLayer(nn.Module):
    """Pre-LN: x + attention(LN(x)), then x + GeGLU(LN(x)). Layer 0 has no norm before its
    attention: the embeddings already end with one."""

    def __init__(self, config: ModernBertConfig, layer: int) -> None:
        super().__init__()
        self.attention_norm = nn.Identity() if layer == 0 else _norm(config)
        self.attention = RotarySelfAttention(config, layer)
        self.output_norm = _norm(config)
        self.feed_forward = GatedFeedForward(config)

    def forward(
        self,
        x: Tensor,
        token_mask: Tensor | None = None,
        output_attentions: bool = False,
        positions: Tensor | None = None,
        packing: Packing | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, C) with token_mask (B, T) (True at real tokens) or None; or packed (N, C)
        with `packing`. positions (T,) or (N,): each token's position, for rotary."""
        attn, probs = self.attention(
            self.attention_norm(x), positions, token_mask, packing, output_attentions
        )
        x = x + attn
        return x + self.feed_forward(self.output_norm(x)), probs


class ModernBertEncoder(nn.Module):
    """ModernBERT's own stack and loop: layers that each know their index (global or local
    attention), an always-present final norm (reported as the last hidden state, as in
    transformers) and, with `config.unpad`, the real tokens packed before the first layer and
    put back after the final norm."""

    def __init__(self, config: ModernBertConfig) -> None:
        super().__init__()
        self.config = config  # read at every forward, so `model.config.unpad = True` applies
        self.layers = nn.ModuleList(
            ModernBertLayer(config, i) for i in range(config.num_hidden_layers)
        )
        self.final_norm = _norm(config)

    def forward(
        self,
        x: Tensor,
        keep_mask: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, ...] | None, tuple[Tensor, ...] | None]:
        """x (B, T, C); keep_mask (B, 1, 1, T) from BertModel's forward, read as token_mask
        (B, T). Returns BERT's encoder's triple: (B, T, C), hidden states, attention maps."""
        b, t, _ = x.shape
        token_mask = None if keep_mask is None else keep_mask[:, 0, 0, :]  # (B, T)
        positions = torch.arange(t, device=x.device)  # (T,): what rotary turns q and k by
        packing = None
        if self.config.unpad:
            if token_mask is None:
                token_mask = torch.ones(b, t, dtype=torch.bool, device=x.device)
            x, packing = pack(x, token_mask)  # (N, C): only the real tokens
            positions, token_mask = packing.positions, None  # (N,); nothing left to mask

        def padded(h: Tensor) -> Tensor:
            """A layer's output as the caller sees it: (B, T, C), unpacked if packed."""
            return h if packing is None else packing.unpack(h)

        hidden_states = [padded(x)] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, probs = layer(x, token_mask, output_attentions, positions, packing)
            if hidden_states is not None:
                hidden_states.append(padded(x))
            if attentions is not None:
                attentions.append(probs)
        x = padded(self.final_norm(x))  # (B, T, C)
        if hidden_states is not None:
            hidden_states[-1] = x  # the final norm's output, as transformers reports it
        return (
            x,
            tuple(hidden_states) if hidden_states is not None else None,
            tuple(attentions) if attentions is not None else None,
        )


class ModernBertPredictionHead(nn.Module):
    """BERT's MLM head with ModernBERT's switches: dense (no bias), GELU, norm (no bias), then the
    decoder, whose weight is tied to the token embeddings (its bias stays)."""

    def __init__(self, config: ModernBertConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.dense = nn.Linear(h, h, bias=config.classifier_bias)
        self.act = get_activation(config.classifier_activation)
        self.norm = _norm(config)
        self.decoder = nn.Linear(h, config.vocab_size, bias=config.decoder_bias)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.decoder(self.norm(self.act(self.dense(hidden))))


def init_modernbert_module(self: nn.Module, module: nn.Module) -> None:
    """ModernBERT's initialisation (as transformers): truncated normal cut at
    +-initializer_cutoff_factor std; std = initializer_range for the weights that read the
    residual stream, divided by sqrt(2L) for those that write into it (attention output, FFN
    down, MLM head dense), so the sum over 2L sublayers keeps its scale. Norms: 1 (and 0)."""
    config: ModernBertConfig = self.config
    std = config.initializer_range
    out_std = std / math.sqrt(2.0 * config.num_hidden_layers)

    def truncated(layer: nn.Module, s: float) -> None:
        cut = config.initializer_cutoff_factor * s
        nn.init.trunc_normal_(layer.weight, mean=0.0, std=s, a=-cut, b=cut)
        if getattr(layer, "bias", None) is not None:
            nn.init.zeros_(layer.bias)

    if isinstance(module, ModernBertEmbeddings):
        truncated(module.word_embeddings, std)
    elif isinstance(module, RotarySelfAttention):
        truncated(module.qkv, std)
        truncated(module.output, out_std)
    elif isinstance(module, GatedFeedForward):
        truncated(module.up, std)
        truncated(module.down, out_std)
    elif isinstance(module, ModernBertPredictionHead):
        truncated(module.dense, out_std)
        if module.decoder.bias is not None:
            nn.init.zeros_(module.decoder.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


class ModernBertModel(BertModel):
    """embeddings -> pre-LN rotary encoder with alternating global / local attention -> final
    norm. No pooler. Returns last_hidden_state (and hidden_states / attentions when asked)."""

    config_class = ModernBertConfig
    embeddings_class = ModernBertEmbeddings
    encoder_class = ModernBertEncoder
    _init_module = init_modernbert_module

    def __init__(self, config: ModernBertConfig, add_pooling_layer: bool = False) -> None:
        if add_pooling_layer:
            raise ValueError(
                "ModernBERT has no pooler; its classifiers read the first token (or the mean)."
            )
        super().__init__(config, add_pooling_layer=False)


class ModernBertForMaskedLM(BertForMaskedLM):
    """ModernBERT with its MLM head (decoder tied to the token embeddings). BERT's forward:
    with labels, logits only at the masked positions."""

    config_class = ModernBertConfig
    base_model_class = ModernBertModel
    mlm_head_class = ModernBertPredictionHead
    _init_module = init_modernbert_module


MODERNBERT_CLASSES: dict[str, type] = {
    cls.__name__: cls for cls in (ModernBertModel, ModernBertForMaskedLM)
}
