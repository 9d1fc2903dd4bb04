"""Past one Redis: two cells, each a real redis-server of the test's own with its own worker
process, behind one Cells client (coordinator/cells.py) and the CLI's --cells / ZKQUEUE_CELLS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from queue_support import CHAIN, PARTITIONS, ROOT, PrivateRedis, QueueEnv, assert_snarkjs_accepts, wait_until

from zkqueue.config import ConfigError, Settings
from zkqueue.coordinator.cells import CellDown, Cells, parse_cells, rank
from zkqueue.coordinator.errors import JobNotFound
from zkqueue.coordinator.jobs import JobState

ZKEY = CHAIN / "circuit_final.zkey"
VK = CHAIN / "verification_key.json"


@dataclass
class CellEnv(QueueEnv):
    """One cell of a test: a QueueEnv on the cell's own Redis, whose store is the one store
    every cell shares (a directory beside the cells' own)."""

    server: PrivateRedis | None = None

    @property
    def store_url(self) -> str:
        return str(self.tmp.parent / "store")


@pytest.fixture
def cells(tmp_path):
    """Cells a and b: two private redis-servers and their QueueEnvs (no workers yet), killed at
    the end; prints the workers' logs when the test fails."""
    made: dict[str, CellEnv] = {}
    try:
        for name in ("a", "b"):
            server = PrivateRedis()
            (tmp_path / name).mkdir()
            made[name] = CellEnv(tmp_path / name, server.r, redis_url=server.url, server=server)
        yield made
    finally:
        for name, cell in made.items():
            cell.close()
            cell.server.close()
            for i, g in enumerate(cell.groups):
                print(f"----- cell {name}, worker group {i} log -----\n{g.log()[-6000:]}")


def cells_setting(cells: dict[str, CellEnv]) -> str:
    return " ".join(f"{name}={cell.redis_url}" for name, cell in cells.items())


def client_of(cells: dict[str, CellEnv]) -> Cells:
    """A Cells client with the test's timers and the shared store (as a fresh process would
    build from ZKQUEUE_CELLS)."""
    any_cell = next(iter(cells.values()))
    settings = Settings.from_env(any_cell.env(), store_url=any_cell.store_url, cells=cells_setting(cells))
    return Cells.from_settings(settings)


def request_ids_for(cell: str, names, n: int, prefix: str = "req") -> list[str]:
    """The first `n` request ids `prefix-i` that rank `cell` first among `names`."""
    out, i = [], 0
    while len(out) < n:
        if rank(f"{prefix}-{i}", names)[0] == cell:
            out.append(f"{prefix}-{i}")
        i += 1
    return out


def zkqueue(env: dict, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkqueue.cli", *map(str, args)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_the_cells_setting_is_checked_with_a_clear_error():
    for text, says in [("", "names no cell"), ("a", "'a' is not NAME=URL"), ("A=redis://h:1/0", "cell name 'A'"),
                       ("a=redis://h:1/0 a=redis://h:2/0", "name a is given twice"),
                       ("a=redis://h:1/0 b=redis://h:1/0", "URL redis://h:1/0 is given twice"),
                       ("a=http://h:1/0", "cell a: .*scheme must be one of")]:
        with pytest.raises(ConfigError, match=says):
            parse_cells(text)
    sentinel = parse_cells("a=sentinel://s1:26379,s2:26379/0 b=redis://h:6379/1")     # commas stay in a URL
    assert [(s.name, s.redis_url) for s in sentinel] == [("a", "sentinel://s1:26379,s2:26379/0"),
                                                         ("b", "redis://h:6379/1")]
    both = zkqueue(dict(os.environ), "status", "--cells", "a=redis://h:1/0", "--redis-url",
                   "redis://h:2/0", "0" * 32, timeout=60)
    assert both.returncode == 2 and "give --cells or --redis-url, not both" in both.stderr, both.stderr
    bad = zkqueue(dict(os.environ, ZKQUEUE_CELLS="a=redis://h:1/0 a=redis://h:2/0"), "status",
                  "0" * 32, timeout=60)
    assert bad.returncode == 2 and "ZKQUEUE_CELLS: name a is given twice" in bad.stderr, bad.stderr


def test_rendezvous_order_is_stable_and_a_new_cell_takes_only_its_own_share():
    keys = [f"req-{i}" for i in range(2000)]
    two = {k: rank(k, ["a", "b"])[0] for k in keys}
    assert 0.4 < sum(v == "a" for v in two.values()) / len(keys) < 0.6
    three = {k: rank(k, ["c", "a", "b"])[0] for k in keys}      # the order of the list does not matter
    moved = [k for k in keys if three[k] != two[k]]
    assert all(three[k] == "c" for k in moved)                  # nothing moves between a and b
    assert 0.25 < len(moved) / len(keys) < 0.42                  # about a third moves to c


def test_jobs_spread_over_two_cells_are_proved_there_and_found_by_id(cells, tmp_path):
    groups = {name: cell.start_workers(1) for name, cell in cells.items()}
    workers = {name: {b["worker"] for b in cells[name].ready(g, timeout_s=120)} for name, g in groups.items()}
    client = client_of(cells)
    try:
        # Two request ids that rank each cell first: the spread is the hash's, not luck.
        rids = request_ids_for("a", cells, 2) + request_ids_for("b", cells, 2)
        jobs = [client.submit(ZKEY, [PARTITIONS[i], PARTITIONS[(i + 1) % 4]], request_id=rid)
                for i, rid in enumerate(rids)]
        assert [client.cell_of(j) for j in jobs] == ["a", "a", "b", "b"]
        for job in jobs:
            result = job.wait(180)
            assert result.complete and len(result.partitions) == 2
            assert_snarkjs_accepts(result.partitions, VK, tmp_path)
        # Each job lives wholly in its cell: its record there alone, proved by that cell's worker.
        for job in jobs:
            cell = client.cell_of(job)
            other = "b" if cell == "a" else "a"
            assert cells[cell].r.exists(f"zkq:job:{job.id}") and not cells[other].r.exists(f"zkq:job:{job.id}")
            assert {p.worker for p in job.status().partitions} <= workers[cell]
            assert client.home(job.id) == cell          # the id names its cell: one lookup, no search

        # Another client process (a fresh Cells) finds every job from its id alone, and the
        # same request id returns the first job.
        with client_of(cells) as again:
            for job, rid in zip(jobs, rids):
                found = again.job(job.id)
                assert again.cell_of(found) == client.cell_of(job)
                assert found.status().state == JobState.DONE
                assert again.submit(ZKEY, PARTITIONS[:1], request_id=rid).id == job.id
            with pytest.raises(JobNotFound, match="no job 0{32} in cell . nor in any other cell"):
                again.job("0" * 32)
        nowhere = zkqueue(cells["a"].env(ZKQUEUE_CELLS=cells_setting(cells)), "status", "0" * 32)
        assert nowhere.returncode == 2 and "nor in any other cell" in nowhere.stderr, nowhere.stderr

        # The CLI: ZKQUEUE_CELLS routes status and submit; --cells does the same.
        env = cells["a"].env(ZKQUEUE_CELLS=cells_setting(cells))
        for job in jobs:
            st = zkqueue(env, "status", job.id)
            assert st.returncode == 0 and "done 2/2" in st.stdout, st.stdout + st.stderr
        sub = zkqueue(env, "submit", ZKEY, PARTITIONS[0], "--request-id", rids[2])
        assert sub.returncode == 0 and sub.stdout.strip() == jobs[2].id, sub.stdout + sub.stderr
        out = tmp_path / "cli"
        waited = zkqueue(cells["b"].env(), "submit", "--cells", cells_setting(cells), ZKEY, *PARTITIONS,
                         "--request-id", request_ids_for("b", cells, 1, prefix="cli")[0], "--wait", "-q",
                         "--out", out, "--timeout", "180", timeout=240)
        assert waited.returncode == 0 and "4 verified proofs" in waited.stdout, waited.stdout + waited.stderr
        cli_job = waited.stdout.split("job ")[1].split(":")[0]
        assert cells["b"].r.exists(f"zkq:job:{cli_job}")
        listing = zkqueue(env, "status")
        assert listing.returncode == 0, listing.stderr
        for name, cell in cells.items():
            assert f"cell {name} ({cell.redis_url}):" in listing.stdout, listing.stdout
        assert listing.stdout.count("1 live worker(s)") == 2, listing.stdout
    finally:
        client.close()


def test_with_one_cell_down_new_jobs_go_to_the_other_and_its_jobs_fail_to_be_found_naming_it(cells, tmp_path):
    group = cells["a"].start_workers(1)
    cells["a"].ready(group, timeout_s=120)
    client = client_of(cells)
    try:
        # A job in b (no worker there: it waits), then b's Redis dies.
        stranded_rid = request_ids_for("b", cells, 1)[0]
        stranded = client.submit(ZKEY, PARTITIONS[:1], request_id=stranded_rid)
        assert client.cell_of(stranded) == "b"
        cells["b"].server.crash()

        # New jobs, including those whose request ids rank b first, go to a and are proved.
        rids = request_ids_for("b", cells, 2, prefix="after") + request_ids_for("a", cells, 1, prefix="after")
        jobs = [client.submit(ZKEY, PARTITIONS[i:i + 1], request_id=rid) for i, rid in enumerate(rids)]
        assert {client.cell_of(j) for j in jobs} == {"a"}
        for job in jobs:
            result = job.wait(180)
            assert result.complete
            assert_snarkjs_accepts(result.partitions, VK, tmp_path)
            assert client.job(job.id).status().state == JobState.DONE

        # The stranded job: a clear error naming its cell, from the library and the CLI.
        with client_of(cells) as fresh:
            with pytest.raises(CellDown, match=f"job {stranded.id} belongs to cell b \\({cells['b'].redis_url}\\), "
                                               "which cannot be reached: .*refused") as err:
                fresh.job(stranded.id)
            assert err.value.cell == "b" and err.value.job_id == stranded.id
        env = cells["a"].env(ZKQUEUE_CELLS=cells_setting(cells))
        st = zkqueue(env, "status", stranded.id)
        assert st.returncode == 1, st.stdout + st.stderr
        assert f"job {stranded.id} belongs to cell b ({cells['b'].redis_url}), which cannot be reached" in st.stderr
        listing = zkqueue(env, "status")
        assert listing.returncode == 0 and "cell b" in listing.stdout and "UNREACHABLE" in listing.stdout

        # Both cells down: a submit says so, naming each.
        cells["a"].server.crash()
        with client_of(cells) as fresh, pytest.raises(CellDown, match="no cell can be reached .*cell a .*cell b|"
                                                                      "no cell can be reached .*cell b .*cell a"):
            fresh.submit(ZKEY, PARTITIONS[:1])
    finally:
        client.close()


def test_the_http_api_on_two_cells_routes_jobs_by_request_and_names_a_dead_cell(cells, tmp_path):
    from api_support import INPUTS, sse_events, start_server, upload_circuit
    from conftest import snarkjs_verifies
    groups = {name: cell.start_workers(1) for name, cell in cells.items()}
    # The API's own records (keys, circuits, quotas) in cell a's Redis; jobs in both cells.
    server = start_server(cells["a"], ZKQUEUE_CELLS=cells_setting(cells))
    try:
        token = server.key("alice")
        http = server.http(token, timeout=180)
        res = upload_circuit(http)
        assert res.status_code == 201, res.text
        cid = res.json()["circuit_id"]
        (tmp_path / "vk.json").write_bytes(http.get(f"/v1/circuits/{cid}/verification_key").content)
        key_id = token.split("_")[1]

        def idempotency_key_for(cell: str, prefix: str) -> str:
            i = 0
            while rank(f"api/{key_id}/{cid}/{prefix}-{i}", cells)[0] != cell:
                i += 1
            return f"{prefix}-{i}"

        for name, g in groups.items():
            cells[name].ready(g, timeout_s=120)
        inputs = [json.loads(p.read_text()) for p in INPUTS[:2]]
        jobs = {}
        for cell in ("a", "b"):
            idem = idempotency_key_for(cell, "order")
            res = http.post(f"/v1/circuits/{cid}/proofs", headers={"Idempotency-Key": idem}, json={"inputs": inputs})
            assert res.status_code == 201, res.text
            jobs[cell] = (idem, res.json()["job_id"])
            assert cells[cell].r.exists(f"zkq:job:{jobs[cell][1]}")
        for cell, (idem, job_id) in jobs.items():
            with http.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
                events = list(sse_events(stream))
            assert events[-1][0] == "end" and events[-1][1]["state"] == "done", events
            st = http.get(f"/v1/jobs/{job_id}").json()
            assert st["state"] == "done"
            for p in st["partitions"]:
                for part in ("proof", "public"):
                    got = http.get(f"/v1/jobs/{job_id}/proofs/{p['index']}/{part}.json")
                    assert got.status_code == 200, got.text
                    (tmp_path / f"{part}.json").write_bytes(got.content)
                assert snarkjs_verifies(tmp_path / "vk.json", tmp_path / "public.json", tmp_path / "proof.json")
            again = http.post(f"/v1/circuits/{cid}/proofs", headers={"Idempotency-Key": idem}, json={"inputs": inputs})
            assert again.status_code == 200 and again.json()["job_id"] == job_id

        cells["b"].server.crash()
        lost = http.get(f"/v1/jobs/{jobs['b'][1]}")
        assert lost.status_code == 503, lost.text
        error = lost.json()["error"]
        assert error["code"] == "unavailable" and error["detail"] == {"cell": "b"}
        assert f"the cell of job {jobs['b'][1]} (b) cannot be reached" in error["message"]
        assert "127.0.0.1" not in error["message"]                      # the fleet's addresses stay inside
        assert http.get(f"/v1/jobs/{jobs['a'][1]}").json()["state"] == "done"
        res = http.post(f"/v1/circuits/{cid}/proofs", headers={"Idempotency-Key": idempotency_key_for("b", "later")},
                        json={"inputs": inputs})
        assert res.status_code == 201, res.text
        job_id = res.json()["job_id"]
        assert cells["a"].r.exists(f"zkq:job:{job_id}")
        wait_until(lambda: http.get(f"/v1/jobs/{job_id}").json()["state"] == "done", 120, "the job on cell a",
                   interval_s=0.5)
    finally:
        server.stop()
        print(f"----- zkqueue serve log -----\n{server.log()[-6000:]}")
