"""A random sweep of the way back's remembered layouts (thinkwire.recorder, thinkwire.written).

    .venv/bin/python -m devtools.sweep_way_back [N] [--seeds K] [--first S] [--longest L] [--more-parts]
                                                [--show M] [--minimize]

Makes N random outputs per seed (seeds S .. S+K-1) of 1 to L parts (12) of every family's
markup, whitespace, code and tags cut short; splits each as one of five model profiles would,
starting inside a block or not, as a body or a stream cut every 1 or 3 characters, finished or
cut off at the token limit; then asks the way back for it with the texts the client reads. Per
seed it counts:

  kept    the way back gives the output as the model wrote it (behind the template's opening
          tag where the profile starts inside a block)
  misses  the split changed the text and no layout was remembered for it: the way back writes
          the profile's guess (allowed, but each is a turn a server's prefix cache re-reads)
  wrong   a layout gave another text (never allowed)

and prints the first M misses and every wrong text, as (model, inside, chunk size, finish, text,
what the client reads; `--minimize`: each also with every part dropped that leaves it a miss). The
exit status is 1 when anything missed or was wrong. About 2,500 outputs a second on one core.
A seed gives the same outputs on every run; tests/test_written.py sweeps 3,000 of seed 19
(THINKWIRE_SWEEP_OUTPUTS and THINKWIRE_SWEEP_SEEDS: more).
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "addon")]

from thinkwire import engine, written  # noqa: E402
from thinkwire.context import FlowContext  # noqa: E402
from thinkwire.settings import Settings  # noqa: E402
from thinkwire.splitter import Split, merge  # noqa: E402

# The parts an output is made of: every family's tags and markers, tags cut short, whitespace
# that trimming takes (or keeps as indented code), code fences and spans, a letter of two bytes.
PARTS = ["<think>", "</think>", "a", "b", "\n", " ", "\t", "\n\n", "    ", "`", "```\n", "<answer>", "</answer>",
         "<response>", "</response>", "<|end|>", "<|start|>assistant<|channel|>final<|message|>",
         "<|channel|>analysis<|message|>", "[BEGIN FINAL RESPONSE]", "é", "<thi", "</thi", "<|end", "<ans"]
# More (`--more-parts`): gpt-oss's other markers and a tool call's header, Apriel's other markup.
# They found the misses a tool call's header right after a block and markup removed after it left
# (the whitespace waiting there went, and the layout did not follow:
# `a<think>x</think> <|end|><|start|>assistant to=`; issue 32, docs/way-back.md).
MORE_PARTS = ["<|return|>", "<|start|>assistant", "<|start|>", "<|channel|>commentary<|message|>", "analysis",
              "assistantfinal", "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}", "<|call|>",
              "[END FINAL RESPONSE]", "<|channel|>final<|message|>", "Here are my reasoning steps:\n"]
MODELS = ["m", "hunyuan-a13b", "granite-3.3-8b", "gpt-oss-20b", "apriel-15b"]
SIZES = [0, 1, 3]   # 0: a whole body; else a stream cut every so many characters

_SETTINGS: dict[bool, Settings] = {}


@dataclass(frozen=True)
class Case:
    model: str
    inside: bool    # the profile's outputs start inside a block (the template opened it)
    size: int
    finish: str     # "stop", or "length": cut off at the token limit
    text: str


@dataclass
class Tally:
    total: int = 0
    kept: int = 0
    misses: list[tuple[Case, tuple[str, str]]] = field(default_factory=list)
    wrong: list[tuple[Case, tuple[str, str], str]] = field(default_factory=list)


def _ctx(memory: written.Memory, case: Case) -> FlowContext:
    settings = _SETTINGS.get(case.inside)
    if settings is None:
        settings = _SETTINGS[case.inside] = Settings.from_values({"think_starts_inside": "on"} if case.inside else {})
    return engine.new_context(settings, {"model": case.model}, None, client="c", upstream="http://up:8000",
                              written=memory)


def _split(ctx: FlowContext, case: Case) -> tuple[str, str]:
    """What the client reads: (the reasoning as chat sends it, the answer)."""
    if case.size == 0:
        r = ctx.split(case.text, finish=case.finish)
    else:
        sp = ctx.splitter()
        text, size = case.text, case.size
        pieces = [p for k in range(0, len(text), size) for p in sp.feed(text[k:k + size])]
        r = Split(merge(pieces + sp.finish(cut_off=case.finish == "length")), 0)
    ctx.tally()
    return "\n\n".join(r.reasoning), r.content


def check(case: Case) -> tuple[str, tuple[str, str], str | None]:
    """("kept", "miss", "same": the split changed nothing and nothing was remembered, or
    "wrong"), what the client reads, and what the way back gave."""
    memory = written.Memory()
    read = _split(_ctx(memory, case), case)
    back = _ctx(memory, case)
    got = back.recall.written(*read)
    if got is None:
        return ("same" if read == ("", case.text) else "miss"), read, None
    rules = back.rules()
    opens = {p.open for p in rules.pairs} | {p.open for p in rules.start_pairs}
    text = case.text
    ok = got == text or got.endswith(text) and got[:len(got) - len(text)] in opens
    return ("kept" if ok else "wrong"), read, got


def cases(n: int, seed: int, longest: int = 12, parts: list[str] = PARTS) -> list[Case]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        model, inside, size = rnd.choice(MODELS), rnd.random() < 0.5, rnd.choice(SIZES)
        text = "".join(rnd.choice(parts) for _ in range(rnd.randint(1, longest)))
        out.append(Case(model, inside, size, rnd.choice(["stop", "length"]), text))
    return out


def sweep(n: int, seed: int, longest: int = 12, parts: list[str] = PARTS) -> Tally:
    tally = Tally()
    for case in cases(n, seed, longest, parts):
        verdict, read, got = check(case)
        tally.total += 1
        if verdict == "kept":
            tally.kept += 1
        elif verdict == "miss":
            tally.misses.append((case, read))
        elif verdict == "wrong":
            assert got is not None
            tally.wrong.append((case, read, got))
    return tally


def minimize(case: Case) -> Case:
    """A miss with every part dropped that leaves it a miss (the text cut into `PARTS` and `MORE_PARTS`)."""
    longest = sorted(PARTS + MORE_PARTS, key=len, reverse=True)
    parts: list[str] = []
    i = 0
    while i < len(case.text):
        part = next((p for p in longest if case.text.startswith(p, i)), case.text[i])
        parts.append(part)
        i += len(part)
    smaller = True
    while smaller:
        smaller = False
        for k in range(len(parts)):
            trial = Case(case.model, case.inside, case.size, case.finish, "".join(parts[:k] + parts[k + 1:]))
            if trial.text and check(trial)[0] == "miss":
                parts, smaller = parts[:k] + parts[k + 1:], True
                break
    return Case(case.model, case.inside, case.size, case.finish, "".join(parts))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=2000, help="outputs per seed")
    ap.add_argument("--seeds", type=int, default=1, help="how many seeds")
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--longest", type=int, default=12, help="parts in an output, at most")
    ap.add_argument("--more-parts", action="store_true", help="MORE_PARTS too (more markers, a tool call header)")
    ap.add_argument("--show", type=int, default=20, help="misses printed")
    ap.add_argument("--minimize", action="store_true", help="print each miss shown minimised too")
    args = ap.parse_args(argv)
    misses: list[tuple[Case, tuple[str, str]]] = []
    bad = 0
    for seed in range(args.first, args.first + args.seeds):
        t = sweep(args.n, seed, args.longest, PARTS + MORE_PARTS if args.more_parts else PARTS)
        print(f"seed {seed}: total {t.total} kept {t.kept} misses {len(t.misses)} wrong {len(t.wrong)}", flush=True)
        misses += t.misses
        bad += len(t.misses) + len(t.wrong)
        for case, read, got in t.wrong:
            print("WRONG", case, read, repr(got))
    for case, read in misses[:args.show]:
        print("MISS", case, read)
        if args.minimize:
            print("  minimised:", repr(minimize(case).text))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
