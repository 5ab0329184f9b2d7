"""The LLM translator for finals with the real model (issue 25): the qwen-0.5b pack (the smallest;
scripts/test.sh installs it with its llama.cpp runtime) translates in llama.cpp, and ``relay run
--final-mt qwen-0.5b`` makes its finals with it; an LLM pack asked for and not installed is a
one-line error naming its install command."""

import json
import re

import pytest

from app.models import store

from .conftest import DATA, relay

CJK = re.compile(r"[\u3400-\u9fff]")


@pytest.fixture(scope="module")
def have_llm():
    inst = store.installed()
    missing = [p for p in ("qwen-0.5b", "llama-cpp-runtime") if p not in inst]
    if missing:
        pytest.fail(f"the LLM packs are not installed: relay models install qwen-0.5b (scripts/test.sh does)")


def test_the_llm_translates_a_sentence(have_llm):
    from app.models.loader import load_final_mt, plan_pair

    tr = load_final_mt(plan_pair("zh-en", no_tts=True), "qwen-0.5b", threads=2)
    try:
        out = tr.translate("今天的会议到此结束，谢谢大家。")
        assert "meeting" in out.lower() and not CJK.search(out) and "\n" not in out, out
        # greedy: the same sentence gives the same text (the cached prompt prefix is reused)
        assert tr.translate("今天的会议到此结束，谢谢大家。") == out
        pre = tr.translate("服务器下周二凌晨停机维护。", target_prefix="The server")
        assert pre.startswith("The server") and len(pre) > len("The server ") + 5, pre
        assert tr.translate("  ") == ""
        assert tr.busy is False  # no call running
    finally:
        tr.close()


def test_relay_run_makes_its_finals_with_the_llm(have_llm):
    p = relay("run", "--input", str(DATA / "zh_demo_20s.wav"), "--fast", "--no-tts", "--json",
              "--final-mt", "qwen-0.5b", timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    summary = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")][-1]
    final = summary["stages"]["final"]
    assert final["final_mt"] == "qwen-0.5b" and final["final_mt_budget_s"] is None  # a file run as fast as it goes
    # ... and no latency rule that could take the LLM off its finals (a file's "lag" is read-ahead)
    assert final["final_mt_paused"] == 0
    assert not {"latency", "final"} & {r["name"] for r in summary["degradation"]["rules"]}
    made = final["final_mt_llm"]
    assert made >= 1 and made + final["final_mt_rejected"] + final["final_mt_failed"] == final["finals"], final
    # each final names its translator: the LLM's, or OPUS-MT's for one it rejected
    assert sum(s["mt"] == "qwen-0.5b" for s in summary["segments"]) == made
    assert {s["mt"] for s in summary["segments"]} <= {"qwen-0.5b", "opus-mt-zh-en"}
    targets = [s["target"] for s in summary["segments"]]
    assert len(targets) >= 3 and all(t.strip() and not CJK.search(t) for t in targets), targets
    words = " ".join(targets).lower()
    assert "sales" in words or "quarter" in words, targets


def test_an_llm_pack_not_installed_names_its_install_command():
    if "qwen-1.5b" in store.installed():
        pytest.skip("qwen-1.5b is installed here")
    p = relay("run", "--input", str(DATA / "zh_03.wav"), "--fast", "--no-tts", "--final-mt", "qwen-1.5b", timeout=120)
    assert p.returncode != 0
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "relay models install qwen-1.5b" in err[0] and "Traceback" not in p.stderr, p.stderr


def test_models_list_shows_the_llm_packs_as_optional():
    p = relay("models", "list", timeout=60)
    assert p.returncode == 0, p.stderr
    rows = {ln.split()[0]: ln for ln in p.stdout.splitlines()[2:] if ln.strip() and not ln.startswith(("install", "optional"))}
    assert {"qwen-0.5b", "qwen-1.5b", "llama-cpp-runtime"} <= rows.keys()
    inst = store.installed()
    for pid in ("qwen-0.5b", "qwen-1.5b", "llama-cpp-runtime"):
        assert ("installed" if pid in inst else "optional") in rows[pid], rows[pid]
    if "qwen-1.5b" not in inst:
        assert "relay models install qwen-1.5b" in p.stdout
    # the plain install line names no optional pack
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("install with:")), "")
    assert "qwen" not in line and "llama" not in line


def test_the_cloud_server_makes_its_finals_with_the_llm(have_llm, tmp_path):
    """`relay serve --final-mt` (here through its environment setting): the server's sessions
    get their finals from the LLM, and each final says so over the wire."""
    from .test_cloud import TOKEN, Server

    srv = Server(tmp_path, pairs="zh-en", env={"RELAY_SERVE_FINAL_MT": "qwen-0.5b"})
    try:
        p = relay("run", "--input", str(DATA / "zh_demo_20s.wav"), "--fast", "--no-tts", "--json", "--cloud", srv.url,
                  "--token", TOKEN, "--ca", srv.cert, "--no-fallback", timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        summary = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")][-1]
        assert summary["stages"]["cloud"]["status"] == "cloud"
        segs = summary["segments"]
        assert len(segs) >= 3 and all(s["target"].strip() and not CJK.search(s["target"]) for s in segs), segs
        by = [s["mt"] for s in segs]
        assert by.count("qwen-0.5b") >= len(by) - 1 and set(by) <= {"qwen-0.5b", "opus-mt-zh-en"}, by
    finally:
        srv.stop()
    assert "Traceback" not in "".join(srv.lines), "".join(srv.lines)[-3000:]
