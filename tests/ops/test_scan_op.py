"""torch.ops.mpirl.linear_scan from plain Python (python/mpirl_ops), as a PyTorch user would load it:
values against a naive loop in float64, torch.autograd.gradcheck with resets and h0 (real and
complex), torch.library.opcheck (schema, fake tensors, autograd registration, AOT dispatch),
torch.compile(fullgraph=True), and errors that name the operator.

Run by ctest (ops.scan_op_python) with MPIRL_OPS_LIBRARY set to the built library. With --cuda
(bench/gpu_check.sh on a GPU machine) it checks the CUDA kernels behind the operator instead:
values and gradients against the CPU operator in float32 and float64, long sequences included,
and opcheck on CUDA tensors."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import mpirl_ops  # noqa: E402

torch.manual_seed(0)
F64, C128 = torch.float64, torch.complex128


def naive(a, b, h0, reverse):
    T = a.shape[0]
    h = torch.zeros_like(a[0]) if h0 is None else h0
    out = [None] * T
    for s in range(T):
        t = T - 1 - s if reverse else s
        h = a[t] * h + b[t]
        out[t] = h
    return torch.stack(out)


def decays(shape, dtype=F64):
    a = torch.rand(shape, dtype=F64) * 0.9 + 0.05
    a = a * (torch.rand(shape[:2] + (1,) * (len(shape) - 2), dtype=F64) > 1 / 6)  # resets
    if dtype == C128:
        a = torch.polar(a, torch.rand(shape, dtype=F64) * 6.28)
    return a


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


def main():
    print("library:", mpirl_ops.library_path())
    for reverse in (False, True):
        for shape in ((1, 1), (50, 7), (33, 2, 3, 4)):
            a, b = decays(shape), torch.randn(shape, dtype=F64)
            h0 = torch.randn(shape[1:], dtype=F64)
            got, want = mpirl_ops.linear_scan(a, b, h0, reverse), naive(a, b, h0, reverse)
            check(torch.allclose(got, want, rtol=1e-12, atol=1e-12), f"values = naive loop, {shape}, reverse {reverse}")
            check(torch.allclose(mpirl_ops.linear_scan(a, b, None, reverse), naive(a, b, None, reverse),
                                 rtol=1e-12, atol=1e-12), f"values without h0 = naive loop, {shape}, reverse {reverse}")
        # The resets do cut: with a_t = 0, h_t = b_t whatever came before.
        a, b = decays((40, 6)), torch.randn(40, 6, dtype=F64)
        h = mpirl_ops.linear_scan(a, b, torch.randn(6, dtype=F64), reverse)
        check(torch.equal(h[a == 0], b[a == 0]), f"a reset gives h_t = b_t, reverse {reverse}")

        for dtype in (F64, C128):
            a = decays((9, 2, 3), dtype).requires_grad_()
            b = torch.randn(9, 2, 3, dtype=dtype, requires_grad=True)
            h0 = torch.randn(2, 3, dtype=dtype, requires_grad=True)
            check(torch.autograd.gradcheck(lambda a, b, h0: mpirl_ops.linear_scan(a, b, h0, reverse), (a, b, h0)),
                  f"gradcheck {dtype} with resets and h0, reverse {reverse}")
            check(torch.autograd.gradcheck(lambda a, b: mpirl_ops.linear_scan(a, b, None, reverse), (a, b)),
                  f"gradcheck {dtype} without h0, reverse {reverse}")

    a = decays((6, 2)).requires_grad_()
    h = mpirl_ops.linear_scan(a, torch.randn(6, 2, dtype=F64))
    try:
        (g,) = torch.autograd.grad(h.sum(), a, create_graph=True)
        torch.autograd.grad(g.sum(), a)
        raise AssertionError("double backward ran")
    except RuntimeError as e:
        check("double backward" in str(e), "a second-order gradient is an error, not a silent zero")

    op = torch.ops.mpirl.linear_scan.default
    samples = [(decays((12, 3)), torch.randn(12, 3, dtype=F64), torch.randn(3, dtype=F64), False),
               (decays((5, 2, 4)).float(), torch.randn(5, 2, 4), None, True),
               (decays((7, 3)).requires_grad_(), torch.randn(7, 3, dtype=F64, requires_grad=True),
                torch.randn(3, dtype=F64, requires_grad=True), True)]
    for i, args in enumerate(samples):
        res = torch.library.opcheck(op, args)
        check(all(v == "SUCCESS" for v in res.values()), f"opcheck sample {i}: {res}")

    def f(x, b, h0):
        return (mpirl_ops.linear_scan(torch.sigmoid(x), b * 2, h0) ** 2).sum()

    compiled = torch.compile(f, fullgraph=True)
    x = torch.randn(16, 4, 8, dtype=F64, requires_grad=True)
    b = torch.randn(16, 4, 8, dtype=F64, requires_grad=True)
    h0 = torch.randn(4, 8, dtype=F64, requires_grad=True)
    eager = f(x, b, h0)
    ge = torch.autograd.grad(eager, (x, b, h0))
    comp = compiled(x, b, h0)
    gc = torch.autograd.grad(comp, (x, b, h0))
    check(torch.allclose(comp, eager, rtol=1e-10) and all(torch.allclose(p, q, rtol=1e-10) for p, q in zip(gc, ge)),
          "torch.compile(fullgraph=True): values and gradients = eager")

    for args, expect in (((torch.ones(4, 3), torch.ones(4, 2)), "differ in shape"),
                         ((torch.ones(4, 3), torch.ones(4, 3), torch.ones(2)), "must be a's shape without time"),
                         ((torch.ones(4, 3, dtype=torch.int64), torch.ones(4, 3, dtype=torch.int64)), "not supported")):
        try:
            mpirl_ops.linear_scan(*args)
            raise AssertionError(f"no error for {expect}")
        except RuntimeError as e:
            check("mpirl::linear_scan" in str(e) and expect in str(e), f"error names the operator: {expect}")
    # The docs' example (docs/models.md, "The scan in your own PyTorch code") runs as written.
    repo = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    page = open(os.path.join(repo, "docs", "models.md")).read()
    block = page.split("## The scan in your own PyTorch code", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        scope = {}
        exec(compile(block, "docs/models.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    check(scope["h"].shape == (64, 16, 32) and scope["b"].grad is not None, "the docs' example runs")
    print("all scan operator checks passed")


def cuda_main():
    assert torch.cuda.is_available(), "--cuda: no CUDA device visible to torch"
    print("library:", mpirl_ops.library_path(), "device:", torch.cuda.get_device_name())
    for dtype, tol in ((F64, 1e-10), (torch.float32, 1e-4)):
        for reverse in (False, True):
            for shape in ((1, 1), (4097, 3, 5), (256, 4096)):
                a = decays(shape).to(dtype).requires_grad_()
                b = torch.randn(shape, dtype=dtype, requires_grad=True)
                h0 = torch.randn(shape[1:], dtype=dtype, requires_grad=True)
                w = torch.randn(shape, dtype=dtype)
                outs = []
                for dev in ("cpu", "cuda"):
                    xs = [t.detach().to(dev).requires_grad_() for t in (a, b, h0)]
                    h = mpirl_ops.linear_scan(*xs, reverse)
                    (h * w.to(dev)).sum().backward()
                    outs.append([h.detach().cpu()] + [x.grad.cpu() for x in xs])
                ok = all(torch.allclose(g, c, rtol=tol, atol=tol) for g, c in zip(outs[1], outs[0]))
                worst = max((g - c).abs().max().item() for g, c in zip(outs[1], outs[0]))
                check(ok, f"CUDA = CPU (h, dL/da, dL/db, dL/dh0), {dtype}, {shape}, reverse {reverse}, max diff {worst:.2e}")
    a = decays((64, 8)).cuda()
    res = torch.library.opcheck(torch.ops.mpirl.linear_scan.default,
                                (a.requires_grad_(), torch.randn(64, 8, dtype=F64, device="cuda", requires_grad=True),
                                 torch.randn(8, dtype=F64, device="cuda", requires_grad=True), False))
    check(all(v == "SUCCESS" for v in res.values()), f"opcheck on CUDA: {res}")
    print("all CUDA scan operator checks passed")


if __name__ == "__main__":
    cuda_main() if "--cuda" in sys.argv[1:] else main()
