"""spar's transformed v2018 sample as jobs, and bench/learning/job_policy_compare_alibaba.py on a hand-made one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from drlsched.jobs.alibaba import load_jobs

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "learning" / "job_policy_compare_alibaba.py"
POLICY = ROOT / "bench" / "results" / "job_policy" / "policy.pt"

# arrival_s,job,task,duration_s,plan_cpu,plan_mem,inst_num: 3 windows of 10 s, two jobs each; j_2's R2_1 needs M1;
# j_9's task has no duration (dropped, and the job with it).
ROWS = """0,j_1,M1,5,100.0,0.3,4
2,j_2,M1,3,50.0,0.3,6
2,j_2,R2_1,4,50.0,0.3,2
4,j_9,M1,0,50.0,0.3,2
11,j_3,M1,8,100.0,0.3,3
15,j_4,M1,2,100.0,0.3,9
21,j_5,M1,6,100.0,0.3,5
25,j_6,M1,1,200.0,0.3,1
25,j_6,J2_1,7,200.0,0.3,3
"""


def _trace(tmp_path: Path) -> Path:
    (tmp_path / "sample_tasks.csv").write_text(ROWS)
    return tmp_path


def test_spar_rows_as_jobs(tmp_path: Path) -> None:
    arrivals, dropped = load_jobs(str(_trace(tmp_path)))
    assert [a.spec.name for a in arrivals] == ["j_1", "j_2", "j_3", "j_4", "j_5", "j_6"]
    assert [a.arrival_s for a in arrivals] == [0.0, 2.0, 11.0, 15.0, 21.0, 25.0]
    m1, r2 = arrivals[1].spec.stages
    assert (m1.tasks, m1.cpu_s, r2.tasks, r2.cpu_s, r2.parents) == (6, 3.0, 2, 4.0, (0,))
    assert dict(dropped) == {"tasks_dropped": 1, "jobs_dropped": 1}


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"})


def test_compare_on_fixture(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    r = _bench("--policy", str(POLICY), "--trace", str(_trace(tmp_path)), "--window-s", "10", "--val-windows", "1",
               "--windows", "2", "--executors", "4", "--out", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert res["validation_windows"] == [0] and res["evaluation_windows"] == [1, 2]
    assert res["jobs_per_window"] == {"0": 2, "1": 2, "2": 2}
    assert res["tuning"]["best"] in res["tuning"]["mean_jct_s"]
    assert set(res["policies"]) == {"fifo", "best", "learned", "learned guarded", "learned guarded, fallback best"}
    assert res["policies"]["fifo"]["jct_mean_s"]["n"] == 2 and res["unfinished_jobs"] == 0
    # window 1 (j_3: 3 tasks × 8 s, j_4: 9 × 2 s) can finish no faster than its tasks' durations
    assert res["runs"]["fifo@1"]["jct_mean_s"] >= 5.0


def test_absent_trace_and_bad_window(tmp_path: Path) -> None:
    r = _bench("--policy", str(POLICY), "--trace", str(tmp_path / "none"))
    assert r.returncode == 2 and "no Alibaba v2018 sample" in r.stderr and "Traceback" not in r.stderr
    r = _bench("--policy", str(POLICY), "--trace", str(_trace(tmp_path)), "--window-s", "10", "--val-windows", "3",
               "--windows", "2")
    assert r.returncode == 2 and "hold no job" in r.stderr and "Traceback" not in r.stderr
