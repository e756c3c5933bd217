"""Cross-layer parameter sharing (ALBERT): many layers applied, few distinct sets of weights.

In PyTorch, sharing is plain assignment: `layers[5].attention = layers[0].attention` puts one
module (one set of tensors) in two places. Gradients from both places add up in the same
`.grad`, and `model.parameters()` yields each shared tensor once.

Groups, as in the reference implementation: the `num_hidden_layers` layers are split into
`num_hidden_groups` runs of consecutive layers that share weights, and every layer applies
`inner_group_num` distinct sublayer stacks in turn. So a forward pass applies
`num_hidden_layers * inner_group_num` layers built from `num_hidden_groups * inner_group_num`
distinct ones.
"""

from __future__ import annotations

from torch import nn

from course_lib.config.albert import SHARING, AlbertConfig
from course_lib.models.bert import Encoder, EncoderLayer

SUBLAYERS = ("attention", "attention_norm", "feed_forward", "output_norm")


def sharing_plan(
    num_hidden_layers: int,
    num_hidden_groups: int = 1,
    inner_group_num: int = 1,
    sharing: str = "all",
) -> list[tuple[int, int]]:
    """For each layer applied in the forward pass, (i_attention, i_ffn): the index of the applied
    layer whose attention / feed-forward weights it uses (its own index when it owns them)."""
    if sharing not in SHARING:
        raise ValueError(f"sharing={sharing!r} is invalid: expected one of {SHARING}.")
    per_group = num_hidden_layers // num_hidden_groups
    first_user: dict[
        tuple[int, int], int
    ] = {}  # (group, position in group) -> first layer using it
    plan = []
    for i in range(num_hidden_layers * inner_group_num):
        layer, inner = divmod(i, inner_group_num)
        owner = first_user.setdefault((layer // per_group, inner), i)
        plan.append(
            (
                owner if sharing in ("all", "attention") else i,
                owner if sharing in ("all", "ffn") else i,
            )
        )
    return plan


class SharedEncoder(Encoder):
    """BERT's encoder with shared weights. `layers` lists every layer the forward pass applies,
    but shared sublayers are the *same objects*, so BERT's forward loop runs unchanged."""

    def build_layers(self, config: AlbertConfig) -> list[nn.Module]:
        """One entry per applied layer; a shared sublayer is the same object in several."""
        layers: list[EncoderLayer] = []
        plan = sharing_plan(
            config.num_hidden_layers,
            config.num_hidden_groups,
            config.inner_group_num,
            config.sharing,
        )
        for i, (i_attention, i_ffn) in enumerate(plan):
            if i_attention != i and i_ffn != i:  # all-shared: the whole layer is an earlier one
                layers.append(layers[i_attention])
                continue
            layer = EncoderLayer(config)
            if i_attention != i:  # shared attention (and its LayerNorm), own feed-forward
                layer.attention = layers[i_attention].attention
                layer.attention_norm = layers[i_attention].attention_norm
            if i_ffn != i:  # shared feed-forward (and its LayerNorm), own attention
                layer.feed_forward = layers[i_ffn].feed_forward
                layer.output_norm = layers[i_ffn].output_norm
            layers.append(layer)
        return layers

    def layer_at(self, i: int) -> EncoderLayer:
        """The layer applied at depth i (0-based); shared layers are the identical object."""
        if not 0 <= i < len(self.layers):
            raise IndexError(
                f"layer {i} does not exist: this encoder applies {len(self.layers)} layers."
            )
        return self.layers[i]

    def shared_sublayers(self) -> dict[str, list[list[int]]]:
        """For each sublayer, the groups of applied layers holding the *identical* module object,
        found by identity (`is`), not from the config: e.g. all-shared 4 layers gives
        {'attention': [[0, 1, 2, 3]], ...}; not-shared gives [[0], [1], [2], [3]]."""
        table = {}
        for name in SUBLAYERS:
            groups: dict[int, list[int]] = {}
            for i, layer in enumerate(self.layers):
                groups.setdefault(id(getattr(layer, name)), []).append(i)
            table[name] = list(groups.values())
        return table
