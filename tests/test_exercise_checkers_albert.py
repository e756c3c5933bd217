"""The chapter 03 checkers accept correct answers and reject typical mistakes with specific
feedback (and the untouched stubs)."""

import copy

import pytest
from torch import nn

from course_lib.config import AlbertConfig
from course_lib.counting import count_parameters
from course_lib.exercises import ExerciseError
from course_lib.exercises.albert import (
    check_albert_parameters,
    check_embedding_size_for_budget,
    check_factorized_embeddings,
    check_partial_sharing,
    check_shared_layers,
    check_sop_pairs,
)


def stub(*args, **kwargs):
    raise NotImplementedError()


# --- exercise 1: the factorized embedding count -------------------------------------------------


def good_embeddings(V, E, H, P, T):
    return (V + P + T) * E + 2 * E + E * H + H


def test_embedding_checker_accepts_the_formula():
    check_factorized_embeddings(good_embeddings)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda V, E, H, P, T: (V + P + T) * H + 2 * H, "BERT's V x H table"),
        (lambda V, E, H, P, T: good_embeddings(V, E, H, P, T) - H, "projection's bias"),
        (lambda V, E, H, P, T: good_embeddings(V, E, H, P, T) - 2 * E, "LayerNorm .* is missing"),
        (
            lambda V, E, H, P, T: good_embeddings(V, E, H, P, T) - 2 * E + 2 * H,
            "2E parameters, not 2H",
        ),
        (lambda V, E, H, P, T: V * E + (P + T) * H + E * H + H + 2 * H, "E-wide too"),
        (lambda V, E, H, P, T: float(good_embeddings(V, E, H, P, T)), "return an int"),
        (lambda V, E, H, P, T: good_embeddings(V, E, H, P, T) + 1, r"off by \+1"),
    ],
)
def test_embedding_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_factorized_embeddings(wrong)


# --- exercise 2: sentence-order pairs -----------------------------------------------------------


def good_sop(segments, rng):
    pairs = []
    for a, b in zip(segments[:-1], segments[1:]):
        if rng.random() < 0.5:
            pairs.append((b, a, 1))
        else:
            pairs.append((a, b, 0))
    return pairs


def test_sop_checker_accepts_a_correct_builder():
    check_sop_pairs(good_sop)


def nsp_style(segments, rng):
    """Negative = a segment from far away (NSP's recipe), not a swap."""
    pairs = []
    for i in range(len(segments) - 1):
        if rng.random() < 0.5:
            pairs.append((segments[i], segments[(i + 50) % len(segments)], 1))
        else:
            pairs.append((segments[i], segments[i + 1], 0))
    return pairs


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (nsp_style, "NSP's negative"),
        (lambda s, rng: [(a, b, 1 - lab) for a, b, lab in good_sop(s, rng)], "labelled"),
        (lambda s, rng: [(a, b, 0) for a, b in zip(s[:-1], s[1:])], "no pair was swapped"),
        (
            lambda s, rng: [
                (b, a, 1) if i % 5 else (a, b, 0) for i, (a, b) in enumerate(zip(s[:-1], s[1:]))
            ],
            "expected about 50%",
        ),
        (lambda s, rng: good_sop(s, rng)[:-1], "adjacent pairs"),
        (lambda s, rng: good_sop(s, __import__("random").Random()), "same rng seed gave different"),
        (
            lambda s, rng: good_sop(s, __import__("random").Random(0)),
            "different seed gave the same",
        ),
        (lambda s, rng: [(a, b, bool(lab)) for a, b, lab in good_sop(s, rng)], "not True/False"),
        (
            lambda s, rng: [(a, b, float(lab)) for a, b, lab in good_sop(s, rng)],
            "use the integers 0",
        ),
    ],
)
def test_sop_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_sop_pairs(wrong)


# --- exercise 3: a shared layer stack -----------------------------------------------------------


def good_shared(make_layer, num_layers, num_groups):
    per_group = num_layers // num_groups
    groups = [make_layer() for _ in range(num_groups)]
    return nn.ModuleList(groups[i // per_group] for i in range(num_layers))


def test_shared_layers_checker_accepts_consecutive_groups():
    check_shared_layers(good_shared)


def deep_copies(make_layer, num_layers, num_groups):
    layer = make_layer()
    return nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))


def interleaved(make_layer, num_layers, num_groups):
    groups = [make_layer() for _ in range(num_groups)]
    return nn.ModuleList(groups[i % num_groups] for i in range(num_layers))


def builds_too_many(make_layer, num_layers, num_groups):
    good = good_shared(make_layer, num_layers, num_groups)
    make_layer()  # an unused extra layer
    return good


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (deep_copies, "copies are not shared"),
        (interleaved, "interleaved"),
        (lambda make, n, g: list(good_shared(make, n, g)), "nn.ModuleList"),
        (lambda make, n, g: nn.ModuleList(list(good_shared(make, n, g))[:-1]), "one entry per"),
        (builds_too_many, "make_layer was called 2 times"),
    ],
)
def test_shared_layers_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_shared_layers(wrong)


# --- exercise 4: the whole AlbertModel count with a sharing strategy ----------------------------


def good_albert(V, E, H, L, I, P, T, sharing):  # noqa: E741
    embeddings = (V + P + T) * E + 2 * E + E * H + H
    attention = 4 * (H * H + H) + 2 * H
    ffn = H * I + I + I * H + H + 2 * H
    n_attention = 1 if sharing in ("all", "attention") else L
    n_ffn = 1 if sharing in ("all", "ffn") else L
    return embeddings + n_attention * attention + n_ffn * ffn + H * H + H


def test_albert_checker_accepts_the_formula():
    check_albert_parameters(good_albert)


def shares_everything_always(V, E, H, L, I, P, T, sharing):  # noqa: E741
    return good_albert(V, E, H, L, I, P, T, "all")


def shares_nothing_always(V, E, H, L, I, P, T, sharing):  # noqa: E741
    return good_albert(V, E, H, L, I, P, T, "none")


def albert_with(**mistake):
    """good_albert with one typical mistake switched on."""

    def count(V, E, H, L, I, P, T, sharing):  # noqa: E741
        emb_ln = 0 if mistake.get("no_embedding_ln") else 2 * E
        embeddings = (V + P + T) * E + emb_ln + E * H + H
        projections = mistake.get("projections", 4)
        attention, ffn = projections * (H * H + H), H * I + I + I * H + H
        ln = 0 if mistake.get("no_sublayer_ln") else 2 * H
        n_attention = 1 if sharing in ("all", "attention") else L
        n_ffn = 1 if sharing in ("all", "ffn") else L
        lns = 2 * L * ln if mistake.get("ln_per_applied_layer") else (n_attention + n_ffn) * ln
        return embeddings + n_attention * attention + n_ffn * ffn + lns + H * H + H

    return count


def swapped_sharing(V, E, H, L, I, P, T, sharing):  # noqa: E741
    other = {"attention": "ffn", "ffn": "attention"}.get(sharing, sharing)
    return good_albert(V, E, H, L, I, P, T, other)


def test_the_mistake_helper_is_right_without_a_mistake():
    check_albert_parameters(albert_with())


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (shares_nothing_always, "counted L times"),
        (shares_everything_always, "NOT shared with sharing=.none."),
        (lambda *a: good_albert(*a) - a[2] * a[2] - a[2], "pooler"),
        (
            lambda V, E, H, L, I, P, T, s: good_albert(V, H, H, L, I, P, T, s) - H * H - H,  # noqa: E741
            "factorized",
        ),
        # the three numbers a student meets at ALBERT-base (all shared)
        (
            albert_with(ln_per_applied_layer=True),
            r"off by \+33,792\): the LayerNorms are counted once per applied layer",
        ),
        (albert_with(no_sublayer_ln=True), r"off by -3,072\): the sublayer LayerNorms are missing"),
        (albert_with(no_embedding_ln=True), r"off by -256\): the embedding LayerNorm"),
        (albert_with(projections=3), "FOUR"),
        (swapped_sharing, "'attention' and 'ffn' are swapped"),
        (lambda *a: float(good_albert(*a)), "return an int"),
        (lambda *a: good_albert(*a) + 5, "Compare term by term"),
    ],
)
def test_albert_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_albert_parameters(wrong)


# --- exercise 5 (design): the largest E within a parameter budget -------------------------------


def solve_for_e(count):
    """largest_embedding_size from a count(V, E, H, L, I, P, T, sharing), in closed form: the
    count is linear in E below H, so the answer is one floor division (capped at H - 1)."""

    def largest(budget, V, H, L, I, P, T, sharing):  # noqa: E741
        at_one = count(V, 1, H, L, I, P, T, sharing)
        per_unit = count(V, 2, H, L, I, P, T, sharing) - at_one
        if per_unit <= 0:  # a count that does not grow with E: every E fits
            return H - 1 if at_one <= budget else None
        E = (budget - at_one) // per_unit + 1  # noqa: N806
        return min(E, H - 1) if E >= 1 else None

    return largest


def library_count(V, E, H, L, I, P, T, sharing):  # noqa: E741
    config = AlbertConfig(
        vocab_size=V,
        embedding_size=E,
        hidden_size=H,
        num_hidden_layers=L,
        intermediate_size=I,
        max_position_embeddings=P,
        type_vocab_size=T,
        num_attention_heads=1,
        sharing=sharing,
    )
    return count_parameters(config, "AlbertModel")["total"]


def search_with_library(budget, V, H, L, I, P, T, sharing):  # noqa: E741
    """A learner who searches upward with count_parameters (slow but exact)."""
    best = None
    for E in range(1, H):  # noqa: N806
        if library_count(V, E, H, L, I, P, T, sharing) > budget:
            break
        best = E
    return best


def test_budget_checker_accepts_a_closed_form_and_a_search():
    check_embedding_size_for_budget(solve_for_e(good_albert))
    check_embedding_size_for_budget(search_with_library)


def counting(**mistake):
    """good_albert with one typical counting mistake switched on."""

    def count(V, E, H, L, I, P, T, sharing):  # noqa: E741
        b = 0 if mistake.get("no_biases") else 1
        ln = 0 if mistake.get("no_layer_norms") else 1
        word = V * H if mistake.get("word_table_h") else V * E
        tables = word + (0 if mistake.get("no_position_tables") else (P + T) * E)
        projection = 0 if mistake.get("no_projection") else E * H + b * H
        embeddings = tables + ln * 2 * E + projection
        attention = 4 * (H * H + b * H) + ln * 2 * H
        ffn = H * I + b * I + I * H + b * H + ln * 2 * H
        sharing = mistake.get("sharing", sharing)
        n_attention = 1 if sharing in ("all", "attention") else L
        n_ffn = 1 if sharing in ("all", "ffn") else L
        return embeddings + n_attention * attention + n_ffn * ffn + H * H + b * H

    return solve_for_e(count)


def strict_boundary(budget, *shape):
    """Keeps E only while its count is BELOW the budget."""
    return search_with_library(budget - 1, *shape)


def first_that_does_not_fit(budget, V, H, L, I, P, T, sharing):  # noqa: E741
    got = solve_for_e(good_albert)(budget, V, H, L, I, P, T, sharing)
    return 1 if got is None else got + 1


def uncapped(budget, V, H, L, I, P, T, sharing):  # noqa: E741
    at_one = good_albert(V, 1, H, L, I, P, T, sharing)
    per_unit = good_albert(V, 2, H, L, I, P, T, sharing) - at_one
    E = (budget - at_one) // per_unit + 1  # noqa: N806
    return E if E >= 1 else None


def zero_when_nothing_fits(*args):
    got = solve_for_e(good_albert)(*args)
    return 0 if got is None else got


def true_division(budget, V, H, L, I, P, T, sharing):  # noqa: E741
    at_one = good_albert(V, 1, H, L, I, P, T, sharing)
    per_unit = good_albert(V, 2, H, L, I, P, T, sharing) - at_one
    return min((budget - at_one) / per_unit + 1, H - 1)


def one_too_small(*args):
    got = solve_for_e(good_albert)(*args)
    return None if got is None else got - 1


def test_the_counting_helper_is_right_without_a_mistake():
    check_embedding_size_for_budget(counting())


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (counting(no_projection=True), "leaves out the E -> H projection"),
        (counting(word_table_h=True), "V x H word table"),
        (counting(no_position_tables=True), "position and segment tables"),
        (counting(no_biases=True, no_layer_norms=True), "weight matrices only"),
        (counting(no_biases=True), "leaves out the biases"),
        (counting(no_layer_norms=True), "leaves out the LayerNorms"),
        (counting(sharing="none"), "ignores `sharing`"),
        (strict_boundary, r"needs exactly .* within the budget .* off-by-one at the boundary"),
        (first_that_does_not_fit, "over the budget. Return the last E that fits"),
        (uncapped, "E must stay below H=256"),
        (zero_when_nothing_fits, r"return None when nothing fits \(0 is not"),
        (true_division, "divide with // and not /"),
        (one_too_small, r"return E=137, expected 138: E=138 still fits"),
    ],
)
def test_budget_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_embedding_size_for_budget(wrong)


# --- exercise 6 (design): partial sharing in real encoder layers --------------------------------

SHARES = {
    "all": ("attention", "attention_norm", "feed_forward", "output_norm"),
    "attention": ("attention", "attention_norm"),
    "ffn": ("feed_forward", "output_norm"),
    "none": (),
}


def good_partial(layers, sharing):
    for layer in layers[1:]:
        for name in SHARES[sharing]:
            setattr(layer, name, getattr(layers[0], name))
    return layers


def test_partial_sharing_checker_accepts_tied_sublayers_and_whole_layers():
    check_partial_sharing(good_partial)

    def whole_layer_for_all(layers, sharing):
        if sharing == "all":
            return nn.ModuleList(layers[0] for _ in layers)
        return good_partial(layers, sharing)

    check_partial_sharing(whole_layer_for_all)


def sharing_with(names, owner=0, copy_values=False):
    def share(layers, sharing):
        for i, layer in enumerate(layers):
            if i == owner % len(layers):
                continue
            for name in names.get(sharing, SHARES[sharing]):
                if copy_values:
                    getattr(layer, name).load_state_dict(getattr(layers[owner], name).state_dict())
                else:
                    setattr(layer, name, getattr(layers[owner], name))
        return layers

    return share


def whole_layers(layers, sharing):
    if sharing == "none":
        return layers
    return nn.ModuleList(layers[0] for _ in layers)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (sharing_with({}, copy_values=True), "a copy is trained separately"),
        (
            sharing_with({"attention": ("attention",)}),
            r"`attention_norm` is its own, but it is part of the attention sublayer",
        ),
        (
            sharing_with({"ffn": ("feed_forward",)}),
            r"`output_norm` is its own, but it is part of the feed-forward sublayer",
        ),
        (
            sharing_with({"attention": SHARES["ffn"], "ffn": SHARES["attention"]}),
            "'attention' and 'ffn' are swapped",
        ),
        (whole_layers, "every entry is the whole layer 0.*that is sharing='all'"),
        (sharing_with({}, owner=-1), "the first layer owns what is shared"),
        (sharing_with({"none": ("attention",)}), "keeps each layer.s own `attention`"),
        (lambda layers, sharing: list(good_partial(layers, sharing)), "nn.ModuleList"),
        (lambda layers, sharing: good_partial(layers, sharing)[:-1], "one entry per applied"),
    ],
)
def test_partial_sharing_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_partial_sharing(wrong)


# ----- the edges: answers right only at the typical sizes are rejected, naming the edge ---------


def sop_popping(segments, rng):
    """Right pairs, but the caller's list of segments is emptied by pop()."""
    pairs = []
    while len(segments) > 1:
        first = segments.pop(0)
        second = segments[0]
        pairs.append((second, first, 1) if rng.random() < 0.5 else (first, second, 0))
    return pairs


def sop_at_least_one_pair(segments, rng):
    """Always makes at least one pair: a one-segment document crashes."""
    pairs = []
    for i in range(max(1, len(segments) - 1)):
        a, b = segments[i], segments[i + 1]
        pairs.append((b, a, 1) if rng.random() < 0.5 else (a, b, 0))
    return pairs


def shared_from_second_layer(make_layer, num_layers, num_groups):
    """Builds the list as [first] + the rest: a single layer comes out twice."""
    run = num_layers // num_groups
    groups = [make_layer() for _ in range(num_groups)]
    return nn.ModuleList([groups[0]] + [groups[i // run] for i in range(1, max(num_layers, 2))])


@pytest.mark.parametrize(
    "checker, wrong, message",
    [
        (
            check_factorized_embeddings,
            lambda V, E, H, P, T: good_embeddings(V, E, H, P, max(T, 2)),
            "one segment type and a tiny vocabulary",
        ),
        (check_sop_pairs, sop_popping, "inputs left unmodified.*modified the list of segments"),
        (check_sop_pairs, sop_at_least_one_pair, "a document of ONE segment.*IndexError"),
        (check_shared_layers, shared_from_second_layer, r"one layer \(num_layers = 1.*IndexError"),
    ],
    ids=lambda x: getattr(x, "__name__", None) if callable(x) else None,
)
def test_an_answer_right_only_at_typical_sizes_is_rejected_at_its_edge(checker, wrong, message):
    with pytest.raises(ExerciseError, match=message):
        checker(wrong)
