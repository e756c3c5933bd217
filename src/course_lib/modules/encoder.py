"""One encoder layer (attention and feed-forward, each wrapped in residual + LayerNorm) and the stack."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from course_lib.config import BertConfig
from course_lib.modules.attention import MultiHeadSelfAttention
from course_lib.modules.feed_forward import FeedForward


class EncoderLayer(nn.Module):
    """Post-LN as in BERT: x = LN(x + Sublayer(x)). Pre-LN (x = x + Sublayer(LN(x))) is an option
    because it trains stably with the short, high-learning-rate schedules a CPU budget needs."""

    # Variants swap the attention sublayer by overriding this (DeBERTa: disentangled attention).
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
        mask: Tensor | None = None,
        output_attentions: bool = False,
        **attention_kwargs: Tensor | None,
    ) -> tuple[Tensor, Tensor | None]:
        """x: [batch, seq, hidden]. `attention_kwargs` go unchanged to the attention sublayer
        (BERT has none; DeBERTa passes its relative embeddings and positions)."""
        if self.pre_layer_norm:
            attn, probs = self.attention(
                self.attention_norm(x), mask, output_attentions, **attention_kwargs
            )
            x = x + self.dropout(attn)
            return x + self.dropout(self.feed_forward(self.output_norm(x))), probs
        attn, probs = self.attention(x, mask, output_attentions, **attention_kwargs)
        x = self.attention_norm(x + self.dropout(attn))
        return self.output_norm(x + self.dropout(self.feed_forward(x))), probs


class Encoder(nn.Module):
    """A stack of layers; collects hidden states and attention maps when asked.

    The loop, the pre-LN final norm and the collected outputs live here once; variants change
    which layers are built (`build_layers`: ALBERT shares them, ModernBERT tells each its index),
    what every layer receives (`layer_inputs`) and how a layer's output reads back as
    (B, T, C) (`layer_outputs`: ModernBERT unpacks its unpadded tokens)."""

    layer_class: type[nn.Module] = EncoderLayer  # variants override, as with attention_class
    # Whether the last collected hidden state is the final norm's output (ModernBERT and its
    # transformers twin) or the last layer's (BERT pre-LN, as transformers' BERT-style models).
    final_norm_in_hidden_states: bool = False

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(self.build_layers(config))
        self.final_norm = self.build_final_norm(config)

    def build_layers(self, config: BertConfig) -> list[nn.Module]:
        """The layers the forward pass applies, in order: one `layer_class` per layer."""
        return [self.layer_class(config) for _ in range(config.num_hidden_layers)]

    def build_final_norm(self, config: BertConfig) -> nn.Module | None:
        """Pre-LN leaves the residual stream un-normalised, so it needs one LayerNorm at the end;
        post-LN (BERT) already ends every layer with one."""
        if not config.pre_layer_norm:
            return None
        return nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def layer_inputs(
        self, x: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor | None, dict[str, Any]]:
        """(x, mask, extra keyword arguments for every layer), computed once per forward pass.
        BERT passes x and the mask through and adds nothing; a variant overrides this one method
        (DeBERTa: zeroed padding, a query-and-key mask, the shared relative-position inputs;
        ModernBERT: rotary positions, and the packed real tokens when unpadding)."""
        return x, mask, {}

    def layer_outputs(self, x: Tensor, layer_kwargs: dict[str, Any]) -> Tensor:
        """A layer's output as the caller sees it, (B, T, C): unchanged, unless `layer_inputs`
        changed the layout (ModernBERT's unpadding packs the real tokens into (N, C))."""
        return x

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, ...] | None, tuple[Tensor, ...] | None]:
        x, mask, layer_kwargs = self.layer_inputs(x, mask)
        hidden_states = [self.layer_outputs(x, layer_kwargs)] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, probs = layer(x, mask, output_attentions, **layer_kwargs)
            if hidden_states is not None:
                hidden_states.append(self.layer_outputs(x, layer_kwargs))
            if attentions is not None:
                attentions.append(probs)
        if self.final_norm is not None:
            x = self.final_norm(x)
        x = self.layer_outputs(x, layer_kwargs)
        if hidden_states is not None and self.final_norm_in_hidden_states:
            hidden_states[-1] = x
        return (
            x,
            tuple(hidden_states) if hidden_states is not None else None,
            tuple(attentions) if attentions is not None else None,
        )
