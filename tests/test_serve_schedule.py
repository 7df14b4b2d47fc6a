"""`lanec run --serve` on the CPU: the serving schedule (positions moving on, requests finishing,
joining and leaving, slots and pages taken from and returned to their pools) passes the runner's
validators at every step of a long run, a corrupted step does not, the digest is order-sensitive,
and the serving loop, on a stand-in session that computes each step with the interpreter, agrees
with its drift checks, gives the same digest twice and names a state that drifted."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.interp.program import Input, Program, State, Step, Weight
from lanec.runtime import dtypes, runner
from lanec.runtime.plan import Buffer, Plan, Source, WeightBinding
from lanec.runtime.runner import Options, RunError, execute, validate_inputs
from lanec.runtime.serve import Digest, Schedule, serve_session

VOCAB, DIM, HEAD, WIDTH = 40, 16, 8, 3


def served_program(batch: int = 4, tokens: int = 1, slots: bool = True, pages: bool = True,
                   columns: int = 6, page_size: int = 4, cache_pages: int | None = None) -> Program:
    """A step of an embedding, a conv over slot states (`slots`), an attention over paged caches
    (`pages`), the logits and their argmax: the inputs, states and outputs a served plan has."""
    rows = batch * tokens
    cache_pages = batch * columns if cache_pages is None else cache_pages
    inputs = [Input(0, "tokens", [rows], "i32")]
    weights = [Weight(10, "embed", "bf16", [VOCAB, DIM], "bf16"), Weight(11, "w.k", "bf16", [HEAD, DIM], "bf16"),
               Weight(12, "w.v", "bf16", [HEAD, DIM], "bf16"), Weight(13, "lm", "bf16", [VOCAB, DIM], "bf16"),
               Weight(14, "conv.w", "bf16", [DIM, WIDTH], "bf16")]
    states, steps, x = [], [Step("embed", {"tokens": 0, "table": 10}, [30])], 30
    if slots:
        inputs.append(Input(1, "slots", [batch, tokens] if tokens > 1 else [batch], "i32"))
        states.append(State(20, "conv", "conv", [rows + 1, DIM, WIDTH - 1 + tokens - 1], "bf16"))
        operands = {"x": 30, "state": 20, "w": 14, "slots": 1}
        if tokens > 1:
            inputs.append(Input(2, "accepted", [batch], "i32"))
            operands["accepted"] = 2
        steps.append(Step("conv", operands, [31], {"offset": 0, "activation": "silu"}))
        x = 31
    if pages:
        inputs += [Input(3, "positions", [rows], "i32"), Input(4, "pages", [batch, columns], "i32")]
        cache = [cache_pages, page_size, 1, HEAD]
        states += [State(21, "key_cache", "kv", cache, "bf16"), State(22, "value_cache", "kv", cache, "bf16")]
        steps += [Step("product", {"x": 30, "w": [11, 12]}, [32, 33]),
                  Step("attention", {"q": x, "k": 32, "v": 33, "k_cache": 21, "v_cache": 22, "pages": 4,
                                     "positions": 3}, [34], {"heads": 2, "kv_heads": 1, "scale": 0.35})]
        x = 34
    steps += [Step("product", {"x": x, "w": [13]}, [35]), Step("argmax", {"x": 35}, [36])]
    return Program(batch=batch, tokens=tokens, inputs=inputs, weights=weights, states=states, steps=steps,
                   outputs=[35, 36])


def run_schedule(program: Program, steps: int, churn: int | None, seed: int = 0):
    """Every step's inputs and the schedule (validated at each step, as the serving loop does)."""
    schedule = Schedule(program, seed, churn)
    seen = []
    for step in range(steps):
        if step:
            schedule.advance()
        inputs = schedule.inputs()
        validate_inputs(program, inputs)
        seen.append((inputs, list(schedule.fresh), [r.ident for r in schedule.rows]))
    return schedule, seen


@pytest.mark.parametrize("tokens", [1, 3])
def test_a_long_schedule_passes_the_validators_at_every_step(tokens):
    program = served_program(batch=4, tokens=tokens)
    schedule, seen = run_schedule(program, 3000, churn=7)
    assert schedule.joined > 400 and schedule.left == schedule.joined and schedule.finished > 0
    assert schedule.reused > 0  # slots freed by a leaving request are handed to a later one
    for (before, _, owners), (after, fresh, next_owners) in zip(seen, seen[1:]):
        for b in range(4):
            rows = slice(b * tokens, (b + 1) * tokens)
            if next_owners[b] != owners[b]:  # a new request: position 0, its slots fresh
                if next_owners[b] >= 0:
                    assert after["positions"][rows][0] == 0
                    if tokens == 1:
                        assert after["slots"][b] in fresh
                    else:
                        assert set(after["slots"][b]) <= set(fresh) and after["accepted"][b] == 1
                continue
            if owners[b] < 0:
                continue
            moved = after["accepted"][b] if tokens > 1 else 1  # on by what it took
            assert after["positions"][rows][0] == before["positions"][rows][0] + moved
            np.testing.assert_array_equal(after["slots"][b], before["slots"][b])  # its slots stay
            held = before["pages"][b][before["pages"][b] >= 0]
            np.testing.assert_array_equal(after["pages"][b][:held.size], held)  # its pages stay
        held = [int(s) for s in np.reshape(after["slots"], -1) if s > 0]
        assert all(held.count(s) == 1 for s in fresh)  # a fresh slot is its new request's alone


def test_churn_keeps_one_padding_row_and_a_request_leaves_every_p_steps():
    _, seen = run_schedule(served_program(batch=5), 200, churn=10)
    for inputs, _, owners in seen:
        assert sum(o < 0 for o in owners) == 1
        padded = owners.index(min(owners))
        assert inputs["slots"][padded] <= 0  # padding: it reads and writes no state
        assert inputs["pages"][padded][0] >= 0 and inputs["positions"][padded] == 0  # its own scratch rows
    schedule, seen = run_schedule(served_program(batch=5, pages=False), 200, churn=10)
    changes = [step for step, ((_, _, a), (_, _, b)) in enumerate(zip(seen, seen[1:]), 1) if a != b]
    assert changes == list(range(10, 200, 10)) and schedule.finished == 0
    assert schedule.joined == schedule.left == 19


def test_pages_are_taken_as_positions_enter_them_and_returned_when_a_request_leaves():
    program = served_program(batch=2, slots=False, columns=4, page_size=4)
    schedule, seen = run_schedule(program, 100, churn=None)
    assert schedule.limit == 16 and schedule.finished > 0 and schedule.joined == schedule.finished
    for inputs, _, _ in seen:
        for b in range(2):
            column = int(inputs["positions"][b]) // 4
            assert (inputs["pages"][b, :column + 1] >= 0).all() and (inputs["pages"][b, column + 1:] < 0).all()
    held = [p for inputs, _, _ in seen for p in inputs["pages"].reshape(-1) if p >= 0]
    assert set(held) == set(range(8))  # every page of the pool served some request


def test_a_batch_of_one_rejoins_its_row_in_the_slot_it_freed():
    program = served_program(batch=1, pages=False)
    schedule, seen = run_schedule(program, 50, churn=5)
    assert schedule.joined == 9 and schedule.reused == 9
    for step, (inputs, fresh, _) in enumerate(seen):
        assert inputs["slots"][0] == 1  # the only slot the states hold
        assert fresh == ([1] if step and step % 5 == 0 else [])


def test_the_validators_reject_a_corrupted_step():
    program = served_program(batch=4)
    _, seen = run_schedule(program, 40, churn=3)
    inputs = seen[-1][0]
    active = [b for b in range(4) if inputs["slots"][b] > 0]
    corrupt = {k: v.copy() for k, v in inputs.items()}
    corrupt["slots"][active[1]] = corrupt["slots"][active[0]]
    with pytest.raises(RunError, match="active requests own distinct slots"):
        validate_inputs(program, corrupt)
    corrupt = {k: v.copy() for k, v in inputs.items()}
    corrupt["slots"][active[0]] = 5  # the states hold slots 1..4
    with pytest.raises(RunError, match="states hold slots 1..4"):
        validate_inputs(program, corrupt)
    corrupt = {k: v.copy() for k, v in inputs.items()}
    corrupt["pages"][0, 0] = 24  # the caches hold pages 0..23
    with pytest.raises(RunError, match="the cache holds pages 0..23"):
        validate_inputs(program, corrupt)
    corrupt = {k: v.copy() for k, v in inputs.items()}
    corrupt["pages"][1, :] = corrupt["pages"][0, :]
    corrupt["positions"][1] = corrupt["positions"][0]
    with pytest.raises(RunError, match="both write row"):
        validate_inputs(program, corrupt)


def test_the_batch_wide_page_check_agrees_with_the_request_by_request_walk(monkeypatch):
    """`validate_pages` takes the whole batch at once where it can; on random tables, valid and
    not (pages out of range, missing or shared, positions not consecutive), it decides as the
    walk over the requests does."""
    rng = np.random.default_rng(11)

    def verdict(pages, positions, tokens):
        try:
            runner.validate_pages(pages, positions, tokens, 4, 12)
        except RunError as error:
            return str(error)
        return "valid"

    decided = []
    for _ in range(400):
        batch, tokens = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        pages = rng.integers(-1, 13 if rng.random() < 0.3 else 12, (batch, 4)).astype(np.int32)
        starts = rng.integers(-1 if rng.random() < 0.1 else 0, 14, batch)
        positions = (starts[:, None] + np.arange(tokens)).reshape(-1)
        if rng.random() < 0.1:
            positions[-1] += 1
        fast = verdict(pages, positions.astype(np.int32), tokens)
        with monkeypatch.context() as walk:
            walk.setattr(runner, "pages_readable", lambda *args: False)
            assert verdict(pages, positions.astype(np.int32), tokens) == fast
        decided.append(fast == "valid")
    assert 20 < sum(decided) < 380  # both verdicts drawn


def test_the_schedule_is_the_seeds():
    program = served_program(batch=3, tokens=2)
    _, first = run_schedule(program, 60, churn=4, seed=1)
    _, again = run_schedule(program, 60, churn=4, seed=1)
    _, other = run_schedule(program, 60, churn=4, seed=2)
    same = all(np.array_equal(a[0][k], b[0][k]) for a, b in zip(first, again) for k in a[0])
    assert same and not all(np.array_equal(a[0]["pages"], b[0]["pages"]) for a, b in zip(first, other))


def test_a_chosen_token_outside_the_vocabulary_is_not_fed_back():
    schedule = Schedule(served_program(batch=2), 0)
    chosen = np.array([3, VOCAB], np.int32)
    with pytest.raises(RunError, match=f"step 0 chose token {VOCAB} in row 1, outside the vocabulary"):
        schedule.advance(chosen)
    schedule = Schedule(served_program(batch=2), 0)
    schedule.advance(np.array([3, 7], np.int32))
    np.testing.assert_array_equal(schedule.inputs()["tokens"], [3, 7])  # greedy: the chosen come back


def test_the_schedule_refuses_states_too_small_for_the_batch():
    program = served_program(batch=4, pages=False)
    program.states[0].shape[0] = 4  # slots 1..3 for 4 requests
    with pytest.raises(RunError, match="need 5"):
        Schedule(program, 0)
    program = served_program(batch=4, slots=False, cache_pages=3)
    with pytest.raises(RunError, match="less than one step"):
        Schedule(program, 0)


def test_the_digest_is_order_and_bit_sensitive():
    a, b = np.arange(6, dtype=np.int32), np.arange(6, dtype=np.int32)[::-1]

    def digest(*arrays):
        d = Digest()
        for array in arrays:
            d.add(array)
        return d.hexdigest()

    assert digest(a, b) == digest(a.copy(), b.copy())
    assert digest(a, b) != digest(b, a)
    assert digest(a) != digest(a.astype(np.int64)) and digest(a) != digest(a.reshape(2, 3))
    flipped = a.copy()
    flipped.view(np.uint8)[5] ^= 1
    assert digest(a) != digest(flipped)


# -- the serving loop on a stand-in session -------------------------------------------------------

def served_plan(program: Program) -> Plan:
    """A plan to serve on the stand-in: the program's inputs, weights, states and outputs as
    buffers (no launches: the stand-in computes the step)."""
    plan = Plan(program=program.to_json(), form="")
    plan.buffers = [Buffer(f"input.{i.role}", tuple(i.shape), "int32", "input", i.role) for i in program.inputs]
    plan.buffers += [Buffer(w.name, tuple(w.shape), "bfloat16", "weight") for w in program.weights]
    plan.buffers += [Buffer(s.name, tuple(s.shape), "bfloat16", "state", s.name) for s in program.states]
    plan.buffers += [Buffer("logits", (program.rows, VOCAB), "float32", "output", 0),
                     Buffer("argmax", (program.rows,), "int32", "output", 1)]
    plan.weights = [WeightBinding(w.name, (Source(w.name, tuple(w.shape), scale=0.3),)) for w in program.weights]
    return plan


def stand_in(drift_at: int | None = None):
    """A Session whose step is the interpreter's (bf16 stores rounded, the states kept as bf16
    values); `drift_at`: from that step on, the conv state's written values come out 25% off."""

    class Session:
        device = "stand-in"
        made: list = []

        def __init__(self, plan, env, sources, pdl=True, seed=None):
            self.made.append(self)
            self.plan, self.env, self.steps, self.writes = plan, env.copy(), 0, 0
            self.program = Program.from_json(plan.program)
            self.stream = type("Stream", (), {"synchronize": lambda self: None})()
            self.outputs: list[np.ndarray] = []
            self.zeroed: list[int] = []

        def step_function(self, graph):
            def step():
                before = {k: v.copy() for k, v in self.env.states.items()}
                self.outputs = self.program.run(self.env, storage=True)
                for name, value in self.env.states.items():
                    self.env.states[name] = dtypes.representable(value, "bfloat16")
                self.steps += 1
                if drift_at is not None and self.steps >= drift_at and "conv" in self.env.states:
                    changed = self.env.states["conv"] != before["conv"]
                    self.env.states["conv"][changed] *= np.float32(1.25)
            return step

        def write(self, inputs):
            self.writes += 1
            self.env.inputs.update({k: np.array(v) for k, v in inputs.items()})

        def zero_slots(self, slots):
            self.zeroed += slots
            for state in self.program.states:
                if state.kind == "conv":
                    self.env.states[state.name][slots] = 0

        def read(self, name):
            spec = self.plan.buffer(name)
            if spec.role == "state":
                return self.env.states[spec.source].copy()
            value = np.asarray(self.outputs[spec.source])
            return dtypes.representable(value, spec.dtype) if value.dtype.kind == "f" else value.astype(np.int32)

        def read_stored(self, name):
            return dtypes.encode(self.read(name), self.plan.buffer(name).dtype)

    return Session


@pytest.fixture
def plan_path(tmp_path):
    path = tmp_path / "served.plan"
    served_plan(served_program(batch=3, tokens=2, columns=5)).write(path)
    return path


def serve_lines(path, monkeypatch, session=None, **options) -> tuple[int, list[str]]:
    monkeypatch.setattr(runner, "Session", session or stand_in())
    lines: list[str] = []
    status = execute(path, Options(**options), lines.append)
    return status, lines


def test_served_steps_agree_with_their_drift_checks_and_repeat_bit_for_bit(plan_path, monkeypatch):
    status, lines = serve_lines(plan_path, monkeypatch, serve=120, churn=6, check_every=40, seed=2)
    assert status == 0, "\n".join(lines)
    checks = [line for line in lines if line.startswith("step ")]
    assert [line.split(":")[0] for line in checks] == ["step 40", "step 80", "step 120"]
    assert all("5 of 5 agree with the interpreter" in line for line in checks), checks
    assert any(line.startswith("drift: 3 checks, all agree; worst ") for line in lines)
    assert any(line.startswith("served 120 steps in ") and "steps/s" in line for line in lines)
    joined = next(line for line in lines if line.startswith("requests: "))
    assert int(joined.split()[1]) >= 20
    digest = next(line for line in lines if line.startswith("digest "))
    _, again = serve_lines(plan_path, monkeypatch, serve=120, churn=6, check_every=40, seed=2)
    assert digest in again
    _, other = serve_lines(plan_path, monkeypatch, serve=120, churn=6, seed=3)
    assert digest not in other and any(line.startswith("drift: not checked") for line in other)


def test_a_state_that_drifts_is_named_at_the_check(plan_path, monkeypatch):
    status, lines = serve_lines(plan_path, monkeypatch, stand_in(drift_at=50), serve=100, churn=5, check_every=25)
    report = "\n".join(lines)
    assert status == 1
    assert "step 25: 5 of 5 agree" in report and "step 50: 4 of 5 agree" in report
    assert "MISMATCH" in report and "check: 4 of 5 agree with the interpreter; mismatch in conv" in report
    assert "drift: 4 checks, 3 failed (steps 50, 75, 100)" in report


def test_joining_requests_have_their_slots_zeroed_before_their_first_step(monkeypatch):
    program = served_program(batch=2, pages=False)
    plan = served_plan(program)
    monkeypatch.setattr(runner, "Session", stand_in())
    from lanec.interp.environment import random_environment

    env = random_environment(program, 0)
    session = runner.Session(plan, env, env.weights)
    schedule = Schedule(program, 0, churn=3)
    assert serve_session(session, schedule, program, env.weights, Options(serve=30, churn=3),
                         lambda line: None) == 0
    assert len(session.zeroed) == schedule.joined == 9


def test_a_slot_table_out_of_range_stops_the_run_before_its_step_is_written(plan_path, monkeypatch):
    from lanec.runtime import serve

    class Corrupted(Schedule):
        def inputs(self):
            inputs = super().inputs()
            if self.step == 30:
                inputs["slots"][0, 0] = 99  # the states hold slots 1..6
            return inputs

    monkeypatch.setattr(serve, "Schedule", Corrupted)
    session = stand_in()
    with pytest.raises(RunError, match=r"request 0 uses slot 99; the states hold slots 1..6"):
        serve_lines(plan_path, monkeypatch, session, serve=100, churn=5)
    assert session.made[-1].writes == session.made[-1].steps == 30  # steps 0..29, nothing of step 30


@pytest.mark.parametrize("arguments, message", [
    (["--churn", "5"], "--check-every and --churn pace --serve's steps: add --serve N"),
    (["--serve", "0"], "--serve 0: at least 1"),
    (["--serve", "10", "--check-every", "0"], "--check-every 0: at least 1"),
    (["--serve", "10", "--check"], "--check is another mode: choose one"),
    (["--serve", "10", "--context", "8"], "--context is another mode: choose one"),
])
def test_serving_options_are_one_line_errors(plan_path, arguments, message):
    result = CliRunner().invoke(main, ["run", str(plan_path), *arguments])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert message in result.output


def test_the_runtimes_own_command_line_takes_the_serving_options():
    path, options = runner.parse(["plan.bin", "--serve", "10000", "--churn", "50", "--check-every", "2000"], "x")
    assert (options.serve, options.churn, options.check_every) == (10000, 50, 2000)


def test_a_plan_for_several_ranks_is_not_served():
    from types import SimpleNamespace

    from lanec.runtime import parallel

    with pytest.raises(RunError, match="--serve runs a plan for one GPU; p.plan is a plan for 2 ranks"):
        parallel.ranks_to_run("p.plan", SimpleNamespace(ranks=2), Options(serve=10, tp=2), None)


def test_a_sessions_slot_zeroing_covers_each_slot_state_row_and_nothing_else():
    program = served_program(batch=3, tokens=2)
    session = object.__new__(runner.Session)  # the plan and its buffers, no GPU
    session.plan = served_plan(program)
    zeroed: dict[str, list[tuple[int, int]]] = {}

    class Recorded:
        def __init__(self, name):
            self.name = name

        def zero(self, offset, nbytes):
            zeroed.setdefault(self.name, []).append((offset, nbytes))

    session.buffers = {spec.name: Recorded(spec.name) for spec in session.plan.buffers}
    session.zero_slots([2, 5])
    row = DIM * (WIDTH - 1 + 1) * 2  # [slot, 16 channels, 3 taps] of bf16
    assert zeroed == {"conv": [(2 * row, row), (5 * row, row)]}  # the caches are paged, not slotted
    with pytest.raises(RunError, match="slot 7 is outside state 'conv': slots 1..6"):
        session.zero_slots([7])
