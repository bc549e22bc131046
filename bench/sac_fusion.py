"""Would fusing SAC's twin critics, or torch.compile, cut the cost of a gradient step? (issue 33, item 3)

SAC evaluates two Q networks of the same shape on the same inputs. This measures, in one process with
one torch thread (as arl-learn sets it), the forward and backward pass of the twin critics on the
Hopper config's shapes (11 observations + 3 actions in, 2 x 256 swish, batch 256):

* ``separate``: two networks, each layer ``F.linear`` (what ``ml_arl/trainers/sac/networks.py`` does);
* ``stacked``: both networks' weights stacked [2, in, out], each layer one ``torch.baddbmm``;
* ``stack-per-pass``: the two networks' own weights stacked on every pass (``torch.stack``, its backward
  handing each network its gradient), then as ``stacked``: what a trainer that keeps its two Q networks
  (their checkpoints, their optimizer) would do;
* ``compiled`` (with ``--compile``): ``separate`` through ``torch.compile`` (its compile time printed).

Bursts of each variant are interleaved; it prints the median ms per pass and the ratio to ``separate``.

    python bench/sac_fusion.py --repeats 7 --compile
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch.nn import functional as F

Params = list[tuple[torch.Tensor, torch.Tensor]]


def separate_params(inputs: int, hidden: int, layers: int, gen: torch.Generator) -> list[Params]:
    sizes = [inputs] + [hidden] * layers + [1]
    return [
        [((torch.randn(o, i, generator=gen) / i**0.5).requires_grad_(), torch.zeros(o, requires_grad=True))
         for i, o in zip(sizes[:-1], sizes[1:])]
        for _ in range(2)
    ]


def stacked_params(nets: list[Params]) -> Params:
    """The same weights, both networks' stacked: [2, in, out] and [2, 1, out]."""
    out = []
    for (w1, b1), (w2, b2) in zip(*nets):
        w = torch.stack([w1.detach().t(), w2.detach().t()]).contiguous().requires_grad_()
        b = torch.stack([b1.detach(), b2.detach()])[:, None, :].contiguous().requires_grad_()
        out.append((w, b))
    return out


def run_separate(nets: list[Params], x: torch.Tensor) -> torch.Tensor:
    outs = []
    for net in nets:
        h = x
        for k, (w, b) in enumerate(net):
            h = F.linear(h, w, b)
            if k < len(net) - 1:
                h = F.silu(h)
        outs.append(h)
    return torch.stack(outs)


def run_stacked(params: Params, x: torch.Tensor) -> torch.Tensor:
    h = x.expand(2, -1, -1)
    for k, (w, b) in enumerate(params):
        h = torch.baddbmm(b, h, w)
        if k < len(params) - 1:
            h = F.silu(h)
    return h


def run_stack_per_pass(nets: list[Params], x: torch.Tensor) -> torch.Tensor:
    h = x.expand(2, -1, -1)
    layers = len(nets[0])
    for k, ((w1, b1), (w2, b2)) in enumerate(zip(*nets)):
        h = torch.baddbmm(torch.stack([b1, b2])[:, None, :], h, torch.stack([w1, w2]).transpose(1, 2))
        if k < layers - 1:
            h = F.silu(h)
    return h


def burst(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, steps: int) -> float:
    """ms per forward + backward pass, over ``steps`` passes."""
    started = time.perf_counter()
    for _ in range(steps):
        fn(x).sum().backward()
    return (time.perf_counter() - started) / steps * 1e3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=14, help="observations + continuous actions (Hopper: 11 + 3)")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200, help="passes per burst")
    parser.add_argument("--repeats", type=int, default=5, help="bursts of each variant, interleaved")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile of the separate critics")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    nets = separate_params(args.inputs, args.hidden, args.layers, gen)
    stacked = stacked_params(nets)
    x = torch.randn(args.batch, args.inputs, generator=gen)
    with torch.no_grad():  # the two layouts compute the same function
        assert torch.allclose(run_separate(nets, x), run_stacked(stacked, x), atol=1e-5)
        assert torch.allclose(run_separate(nets, x), run_stack_per_pass(nets, x), atol=1e-5)
    variants: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "separate": lambda v: run_separate(nets, v),
        "stacked": lambda v: run_stacked(stacked, v),
        "stack-per-pass": lambda v: run_stack_per_pass(nets, v),
    }
    if args.compile:
        compiled = torch.compile(lambda v: run_separate(nets, v))
        started = time.perf_counter()
        compiled(x).sum().backward()
        print(f"torch.compile: {time.perf_counter() - started:.1f} s to compile (forward and backward)")
        variants["compiled"] = compiled
    for fn in variants.values():  # warm-up
        burst(fn, x, 10)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, fn in variants.items():
            times[name].append(burst(fn, x, args.steps))
    base = statistics.median(times["separate"])
    print(f"twin critics {args.inputs} -> {args.layers} x {args.hidden} swish -> 1, batch {args.batch}, "
          f"forward + backward, median of {args.repeats} bursts of {args.steps}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:14s} {med:7.3f} ms   / separate {med / base:.2f}")


if __name__ == "__main__":
    main()
