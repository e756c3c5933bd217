"""One encoder layer (attention and feed-forward, each wrapped in residual + LayerNorm) and the stack."""

from __future__ import annotations

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
    the layer (`layer_class`) and what every layer receives (`layer_inputs`)."""

    layer_class: type[nn.Module] = EncoderLayer  # variants override, as with attention_class

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            self.layer_class(config) for _ in range(config.num_hidden_layers)
        )
        # Pre-LN leaves the residual stream un-normalised, so it needs one LayerNorm at the end.
        self.final_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
            if config.pre_layer_norm
            else None
        )

    def layer_inputs(
        self, x: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor | None, dict[str, Tensor | None]]:
        """(x, mask, extra keyword arguments for every layer), computed once per forward pass.
        BERT passes x and the mask through and adds nothing; a variant overrides this one method
        (DeBERTa: zeroed padding, a query-and-key mask, the shared relative-position inputs)."""
        return x, mask, {}

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, ...] | None, tuple[Tensor, ...] | None]:
        x, mask, layer_kwargs = self.layer_inputs(x, mask)
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, probs = layer(x, mask, output_attentions, **layer_kwargs)
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
