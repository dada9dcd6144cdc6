"""The built-ins' algorithm, chosen as CANN's HCCL chooses it (hcomm_kit/emu/src/hccl/algo_select.cc,
algo_cost.cc; hcomm_kit/ops/selector.py).

The reference is hicann/hccl at 09300b70, read by hand: each case of the table below gives the
algorithm CANN's AICPU auto selector returns for the call and the file:line of the branch that
returns it (``src/ops/<op>/selector/<op>_auto_selector.cc``), after the topology fields CANN's
``topo_host.cc`` computes from the rank graph. The selection answers without a communicator
(``HcommKitAlgoSelectOn``), so the table costs no ranks.
"""

from __future__ import annotations

import pytest

from hcomm_kit.base.errors import ConfigError
from hcomm_kit.core.topology import Topology
from hcomm_kit.ops import selector
from hcomm_kit.ops.algorithms import ALGORITHMS, ALIASES, canonical, resolve

K, M, G = 1 << 10, 1 << 20, 1 << 30
FP32, INT64, FP16 = 4, 5, 3
SUM, PROD = 0, 1


def topo(spec: str, down: tuple[tuple[int, int], ...] = (), pods: tuple[tuple[int, ...], ...] | None = None,
         sizes: tuple[int, ...] | None = None) -> Topology:
    """``PRODUCT:SxN`` (servers of consecutive ranks), or servers of ``sizes``; ``pods`` groups servers."""
    product, shape = spec.split(":")
    ns, nl = map(int, shape.split("x"))
    sizes = sizes or (nl,) * ns
    servers, first = [], 0
    for s in sizes:
        servers.append(tuple(range(first, first + s)))
        first += s
    return Topology(product=product, source=spec, servers=tuple(servers),
                    pods=pods or tuple((i,) for i in range(len(servers))), links_down=down)


A2_1x8, A2_1x2, A2_1x4, A2_2x8, A2_2x4 = (topo("A2:1x8"), topo("A2:1x2"), topo("A2:1x4"), topo("A2:2x8"),
                                          topo("A2:2x4"))
A2_8x1 = topo("A2:8x1")
A2_3_5 = topo("A2:2x4", sizes=(3, 5))          # servers of 3 and 5 ranks: gcd 1
A3_1x16 = topo("A3:1x16")
A3_PODS = topo("A3:4x4", pods=((0, 1), (2, 3)))  # 2 super-pods of 2 servers of 4: three layers
A950_1x8 = topo("950:1x8")

AR, AG, RS = "all_reduce_auto_selector.cc", "all_gather_auto_selector.cc", "reduce_scatter_auto_selector.cc"
BC, RD, SC = "broadcast_auto_selector.cc", "reduce_auto_selector.cc", "scatter_auto_selector.cc"

# (topology, collective, bytes (of DataDes.count), dtype, op) -> (CANN's algorithm, file:line)
CASES = [
    # ---- one A2 server of 8 (MESH_1D, one level; ratio 8/n/n = 1/8)
    (A2_1x8, "allreduce", 64 * K, FP32, SUM, "AicpuAllReduceSoleMeshOneShot", f"{AR}:545"),
    (A2_1x8, "allreduce", 1 * M, FP32, SUM, "AicpuAllReduceSoleMeshOneShot", f"{AR}:545"),
    (A2_1x8, "allreduce", 8 * M, FP32, SUM, "AicpuAllReduceSoleMeshOneShot", f"{AR}:545"),  # <= 8 MiB
    (A2_1x8, "allreduce", 8 * M + 4, FP32, SUM, "AicpuAllReduceSoleMeshTwoShot", f"{AR}:550"),
    (A2_1x8, "allreduce", 64 * M, FP32, SUM, "AicpuAllReduceSoleMeshTwoShot", f"{AR}:550"),
    (A2_1x8, "allreduce", 256 * M, FP32, SUM, "AicpuAllReduceSoleMeshTwoShot", f"{AR}:550"),  # 32 MiB: not above
    (A2_1x8, "allreduce", 512 * M, FP32, SUM, "AicpuAllReduceSoleMeshChunkTwoShot", f"{AR}:548"),
    (A2_1x8, "allreduce", 1 * M, INT64, SUM, "AicpuAllReduceSoleMeshOneShot", f"{AR}:539"),
    (A2_1x8, "allreduce", 16 * M, INT64, SUM, "AicpuAllReduceSoleMeshTwoShot", f"{AR}:540"),
    (A2_1x8, "allreduce", 64 * M, FP32, PROD, "AicpuAllReduceSoleMeshTwoShot", f"{AR}:540"),
    (A2_1x8, "allgather", 1 * M, FP32, SUM, "AicpuAllGatherSoleMesh", f"{AG}:360"),
    (A2_1x8, "allgather", 512 * M, FP16, SUM, "AicpuAllGatherSoleMesh", f"{AG}:360"),
    (A2_1x8, "reduce_scatter", 1 * M, FP32, SUM, "AicpuReduceScatterSoleMesh", f"{RS}:494"),
    (A2_1x8, "reduce_scatter", 16 * M, FP32, SUM, "AicpuReduceScatterSoleMesh", f"{RS}:494"),
    (A2_1x8, "reduce_scatter", 32 * M, FP32, SUM, "AicpuReduceScatterSoleMeshChunk", f"{RS}:492"),
    (A2_1x8, "reduce_scatter", 32 * M, INT64, SUM, "AicpuReduceScatterSoleMesh", f"{RS}:478"),
    (A2_1x8, "broadcast", 1 * M, FP32, SUM, "AicpuBroadcastSoleMeshTwoShot", f"{BC}:236"),
    (A2_1x8, "reduce", 1 * M, FP32, SUM, "AicpuReduceSoleMesh", f"{RD}:324"),
    (A2_1x8, "reduce", 8 * M, FP32, SUM, "AicpuReduceSoleMeshTwoShot", f"{RD}:322"),
    (A2_1x8, "scatter", 1 * M, FP32, SUM, "AicpuScatterSoleMesh", f"{SC}:192"),
    (A2_1x8, "alltoall", 1 * M, FP32, SUM, "AicpuAllToAllSoleMeshSingleChannel", "alltoall_auto_selector.cc:161"),
    (A2_1x8, "alltoall", 32 * M, FP32, SUM, "AicpuAllToAllSoleMesh", "alltoall_auto_selector.cc:159"),
    (A2_1x8, "alltoallv", 1 * M, FP32, SUM, "AicpuAllToAllVSoleMesh", "alltoallv_auto_selector.cc:120"),
    (A2_1x8, "barrier", 0, FP32, SUM, "AicpuBarrierSoleNHR", "barrier_auto_selector.cc:41"),
    (A2_1x8, "send_recv", 4 * K, FP32, SUM, "AicpuSendSole", "send_auto_selector.cc:24"),
    # ---- smaller servers: the size thresholds scale with 8/n/n (allreduce), (8/n)^2 (reduce-scatter)
    (A2_1x2, "allreduce", 16 * M, FP32, SUM, "AicpuAllReduceSoleMeshTwoShot", f"{AR}:550"),
    (A2_1x2, "allreduce", 32 * M, FP32, SUM, "AicpuAllReduceSoleMeshChunkTwoShot", f"{AR}:548"),
    (A2_1x2, "reduce_scatter", 1 * M, FP32, SUM, "AicpuReduceScatterSoleMesh", f"{RS}:494"),
    (A2_1x2, "reduce_scatter", 2 * M, FP32, SUM, "AicpuReduceScatterSoleMeshChunk", f"{RS}:492"),
    (A2_1x4, "allreduce", 64 * M, FP32, SUM, "AicpuAllReduceSoleMeshTwoShot", f"{AR}:550"),
    (A2_1x4, "allreduce", 128 * M, FP32, SUM, "AicpuAllReduceSoleMeshChunkTwoShot", f"{AR}:548"),
    (A3_1x16, "allreduce", 64 * M, FP32, SUM, "AicpuAllReduceSoleMeshTwoShot", f"{AR}:550"),
    (A3_1x16, "allreduce", 2 * G, FP32, SUM, "AicpuAllReduceSoleMeshChunkTwoShot", f"{AR}:548"),
    (A950_1x8, "allreduce", 1 * M, FP32, SUM, "AicpuAllReduceSoleMeshOneShot", f"{AR}:545"),
    # ---- two A2 servers of 8 (two levels, MESH_1D inside, equal servers)
    (A2_2x8, "allreduce", 1 * M, FP32, SUM, "AicpuAllReduceSoleNHR", f"{AR}:458"),
    (A2_2x8, "allreduce", 32 * M, FP32, SUM, "AicpuAllReduceSoleNHR", f"{AR}:458"),  # 32 MiB: not above
    (A2_2x8, "allreduce", 64 * M, FP32, SUM, "AicpuAllReduceParallelMeshNHR", f"{AR}:456"),
    (A2_2x8, "allreduce", 8 * G, FP32, SUM, "AicpuAllReduceSequenceMeshConcurNHR", f"{AR}:455"),
    (A2_2x8, "allreduce", 1 * M, INT64, SUM, "AicpuAllReduceSoleNHRAicpuReduce", f"{AR}:434"),
    (A2_2x8, "allreduce", 1 * M, FP32, PROD, "AicpuAllReduceSoleNHRAicpuReduce", f"{AR}:434"),
    (A2_2x8, "allgather", 1 * M, FP32, SUM, "AicpuAllGatherSoleNHR", f"{AG}:345"),
    (A2_2x8, "allgather", 2 * M, FP32, SUM, "AicpuAllGatherParallelMeshNHR", f"{AG}:343"),
    (A2_2x8, "allgather", 512 * M, FP32, SUM, "AicpuAllGatherSequenceMeshConcurNHR", f"{AG}:342"),
    (A2_2x8, "reduce_scatter", 4 * M, FP32, SUM, "AicpuReduceScatterSoleNHR", f"{RS}:454"),
    (A2_2x8, "reduce_scatter", 8 * M, FP32, SUM, "AicpuReduceScatterParallelMeshNHR", f"{RS}:452"),
    (A2_2x8, "reduce_scatter", 512 * M, FP32, SUM, "AicpuReduceScatterSequenceMeshConcurNHR", f"{RS}:451"),
    (A2_2x8, "reduce_scatter", 8 * M, FP32, PROD, "AicpuReduceScatterSoleNHRAicpuReduce", f"{RS}:423"),
    (A2_2x8, "broadcast", 1 * M, FP32, SUM, "AicpuBroadcastParallelMeshNHR", f"{BC}:217"),
    (A2_2x8, "reduce", 1 * M, FP32, SUM, "AicpuReduceParallelMeshNHR", f"{RD}:301"),
    (A2_2x8, "reduce", 1 * M, INT64, SUM, "AicpuReduceSoleNHRAicpuReduce", f"{RD}:280"),
    (A2_2x8, "scatter", 1 * M, FP32, SUM, "AicpuScatterParallelMeshNHR", f"{SC}:178"),
    (A2_2x8, "alltoall", 1 * M, FP32, SUM, "AicpuAllToAllSoleMeshSingleChannel", "alltoall_auto_selector.cc:161"),
    (A2_2x4, "allreduce", 64 * M, FP32, SUM, "AicpuAllReduceParallelMeshNHR", f"{AR}:456"),
    # ---- one rank per server, and servers whose sizes have gcd 1: Level1Nhr first (CalcLevel1Nhr)
    (A2_8x1, "allreduce", 64 * M, FP32, SUM, "AicpuAllReduceSoleNHR", f"{AR}:446"),
    (A2_8x1, "allgather", 64 * M, FP32, SUM, "AicpuAllGatherSoleNHR", f"{AG}:325"),
    (A2_8x1, "reduce_scatter", 64 * M, FP32, SUM, "AicpuReduceScatterSoleNHR", f"{RS}:434"),
    (A2_8x1, "broadcast", 1 * M, FP32, SUM, "AicpuBroadcastSoleNHR", f"{BC}:213"),
    (A2_8x1, "reduce", 1 * M, FP32, SUM, "AicpuReduceSoleNHR", f"{RD}:283"),  # one card a server first
    (A2_8x1, "scatter", 1 * M, FP32, SUM, "AicpuScatterSoleNHR", f"{SC}:174"),
    (A2_3_5, "allreduce", 64 * M, FP32, SUM, "AicpuAllReduceSoleNHR", f"{AR}:446"),
    (A2_3_5, "reduce", 64 * M, FP32, SUM, "AicpuReduceSoleNHR", f"{RD}:299"),
    # ---- A3 super-pods: three layers (server, super-pod, all)
    (A3_PODS, "allreduce", 1 * M, FP32, SUM, "AicpuAllReduceSequenceMeshConcurNHRNHR", f"{AR}:452"),
    (A3_PODS, "allgather", 1 * M, FP32, SUM, "AicpuAllGatherSequenceMeshConcurNHRNHR", f"{AG}:335"),
    (A3_PODS, "reduce_scatter", 1 * M, FP32, SUM, "AicpuReduceScatterSequenceMeshConcurNHRNHR", f"{RS}:444"),
    (A3_PODS, "broadcast", 1 * M, FP32, SUM, "AicpuBroadcastSequenceMesh1dNHRNHR", f"{BC}:208"),
    (A3_PODS, "reduce", 1 * M, FP32, SUM, "AicpuReduceSequenceMesh1DNHRNHR", f"{RD}:294"),
    (A3_PODS, "scatter", 1 * M, FP32, SUM, "AicpuScatterSequenceMeshConcurNHRNHR", f"{SC}:169"),
]


def _count(nbytes: int, dtype: int) -> int:
    return nbytes // {FP32: 4, INT64: 8, FP16: 2}[dtype]


@pytest.mark.parametrize("t,coll,nbytes,dtype,op,name,source", CASES,
                         ids=[f"{c[0].source}-{c[1]}-{c[2]}-{c[3]}-{c[4]}" for c in CASES])
def test_cann_choice_table(t: Topology, coll: str, nbytes: int, dtype: int, op: int, name: str, source: str) -> None:
    kernel = canonical(coll, name)  # the built-in that implements CANN's choice, if one does
    for rank in (0, t.nranks - 1):  # every rank chooses the same
        _, sel = selector.select_on(t, rank, coll, _count(nbytes, dtype), dtype, op)
        assert (sel.cann, sel.source) == (name, source)
        # and the built-in runs it (every collective's CANN choice on these shapes)
        assert (sel.name, sel.kernel) == ((name, ALGORITHMS[coll][kernel]) if kernel else ("", 0)), sel


def test_every_choice_of_the_table_runs() -> None:
    """Each of CANN's choices in the table has a built-in that runs it (but the send, a
    point-to-point call), the three-level broadcast / reduce / scatter of A3 super-pods included."""
    missing = sorted({c[5] for c in CASES if canonical(c[1], c[5]) is None})
    assert missing == ["AicpuSendSole"]


def test_topology_fields_from_the_rank_graph() -> None:
    """CANN's TopoInfoWithNetLayerDetails as topo_host.cc computes it from the rank graph's answers."""
    info, _ = selector.select_on(A2_2x8, 9, "allreduce", 1, FP32)
    assert (info["topoLevelNums"], info["netLayerNum"], info["serverNum"], info["deviceNumPerModule"]) == (2, 2, 2, 8)
    assert info["instSizeListOfLayer"] == [[8, 8], [16]] and info["localNetInsSizeOfLayer"] == [8, 16]
    assert info["netInstNumOfLayer"] == [2, 1] and info["level0Topo"] == 1  # MESH_1D
    assert (info["Level1Nhr"], info["twoLevelNetLayer"], info["level0Symmetric"], info["level1Symmetric"]) == (0, 1, 1, 1)
    one, _ = selector.select_on(A2_1x8, 0, "allreduce", 1, FP32)
    assert (one["topoLevelNums"], one["twoLevelNetLayer"], one["instSizeListOfLayer"]) == (1, 0, [[8]])
    odd, _ = selector.select_on(A2_3_5, 4, "allreduce", 1, FP32)  # rank 4: on the server of 5
    assert (odd["Level1Nhr"], odd["level0Symmetric"], odd["localNetInsSizeOfLayer"]) == (1, 0, [5, 8])
    pods, _ = selector.select_on(A3_PODS, 0, "allreduce", 1, FP32)
    assert (pods["topoLevelNums"], pods["netInstNumOfLayer"], pods["localNetInsSizeOfLayer"]) == (3, [4, 2, 1], [4, 8, 16])


def test_a_downed_link_fails_every_rank_naming_it() -> None:
    """CANN's topology calculation fails on the ranks of a server mesh without the link
    (topo_host.cc:1070); the emulator fails the collective on every rank, naming the link and
    HCOMM_KIT_LINKS_DOWN. Point-to-point calls need only their own link."""
    t = topo("A2:1x8", down=((0, 1),))
    info0, _ = selector.select_on(t, 0, "send_recv", 4, FP32)   # a send is not refused here
    info5, _ = selector.select_on(t, 5, "send_recv", 4, FP32)
    assert "topo_host.cc:1070" in info0["error"] and info5["error"] == ""
    for rank in (0, 5):
        with pytest.raises(ConfigError, match=r"AicpuAllReduceSoleMeshOneShot needs the HCCS link 0-1 \(a channel to "
                                              r"every peer\), which is down \(HCOMM_KIT_LINKS_DOWN="):
            selector.select_on(t, rank, "allreduce", 256, FP32)
    # across servers: the algorithm's own links decide. NHR over every rank (ranks 1, 2, 4 apart)
    # needs 3-4; the two-level ones (a mesh in each server, NHR among same-index ranks) do not
    two = topo("A2:2x4", down=((3, 4),))
    with pytest.raises(ConfigError, match=r"AicpuAllReduceSoleNHR needs the RoCE link 3-4 \(NHR over every rank\)"):
        selector.select_on(two, 0, "allreduce", 1 * M // 4, FP32)
    _, sel = selector.select_on(two, 0, "allreduce", 64 * M // 4, FP32)
    assert sel.name == "AicpuAllReduceParallelMeshNHR"
    with pytest.raises(ConfigError, match=r"AicpuAllReduceParallelMeshNHR needs the RoCE link 1-5 \(a mesh inside"):
        selector.select_on(topo("A2:2x4", down=((1, 5),)), 0, "allreduce", 64 * M // 4, FP32)
    one = topo("A2:1x8", down=((0, 3),))  # ranks 3 apart: NHR does not use it, the mesh does
    _, sel = selector.select_on(one, 0, "allreduce", 1 * M // 4, FP32, forced="AicpuAllReduceSoleNHR")
    assert sel.name == "AicpuAllReduceSoleNHR"
    pair, _ = selector.select_on(topo("A2:1x2", down=((0, 1),)), 0, "send_recv", 4, FP32)
    assert pair["error"] == ""  # two ranks: CANN's Is2DieFullMesh does not look (rankNum <= 2)


# ---- HCCL_ALGO: CANN's two grammars, applied to CANN's registered algorithms ------------------
def _kept(text: str, coll: str = "allreduce") -> tuple[bool, list[str]]:
    d = selector.apply_hccl_algo(text, coll)
    return d["decided"], d["kept"]


def test_executor_grammar_filters_as_update_cost_model_with_algo() -> None:
    aicpu = [n for n in selector_names("allreduce") if n.startswith("Aicpu")]
    assert _kept("allreduce:meshtwoshot") == (True, ["AicpuAllReduceSoleMeshTwoShot"])
    assert _kept("AllReduce:Sole{level0=Mesh_Two_Shot}") == (True, ["AicpuAllReduceSoleMeshTwoShot"])
    assert _kept("allreduce:meshoneshot;allreduce:meshtwoshot") == (True, ["AicpuAllReduceSoleMeshTwoShot"])
    decided, kept = _kept("not(sole{meshoneshot})")
    assert decided and kept == [n for n in aicpu if n != "AicpuAllReduceSoleMeshOneShot"]
    decided, kept = _kept("allreduce:sole{}")
    assert decided and kept == [n for n in aicpu if n.startswith("AicpuAllReduceSole")]
    # sole{not(mesh)}: one template after Sole, any but Mesh (longest names first)
    decided, kept = _kept("allreduce:sole{not(mesh)}")
    assert decided and "AicpuAllReduceSoleMeshOneShot" in kept and "AicpuAllReduceSoleNHR" in kept
    assert "AicpuAllReduceSoleNHRTwoShotMultiLink" not in kept and "AicpuAllReduceParallelMeshNHR" not in kept
    assert _kept("allgather:mesh;allreduce:nhr", "allgather") == (True, ["AicpuAllGatherSoleMesh"])
    assert _kept("allgather:mesh;allreduce:nhr") == (True, ["AicpuAllReduceSoleNHR"])
    assert _kept("parallel{mesh,nhr}", "reduce_scatter") == (True, ["AicpuReduceScatterParallelMeshNHR"])
    # a rule matching no algorithm of the op leaves the choice alone (only CANN's Aicpu engine stays)
    assert _kept("allreduce:sequence{level0=mesh,level1=mesh}") == (False, aicpu)
    assert _kept("allgather:mesh") == (False, aicpu)


def selector_names(coll: str) -> list[str]:
    """CANN's registered algorithms of coll, as the emulator lists them (a rule matching all of them)."""
    return selector.apply_hccl_algo("level0:NA", coll)["kept"] or []


def test_documented_level_form() -> None:
    decided, kept = _kept("level0:NA;level1:NHR")
    assert decided and kept and all("NHR" in n for n in kept) and "AicpuAllReduceParallelMeshNHR" in kept
    decided, kept = _kept("allreduce=level0:NA;level1:fullmesh/allgather=level0:NA;level1:NHR")
    assert decided and all("Mesh" in n and "NHR" not in n for n in kept)
    assert _kept("allreduce=level0:NA;level1:NHR", "allgather")[0] is False  # another op's setting
    with pytest.raises(ConfigError, match="H-D_R.*none of CANN's AICPU algorithms of allgather"):
        selector.apply_hccl_algo("level0:NA;level1:H-D_R", "allgather")


@pytest.mark.parametrize("text,needle", [
    ("allreduce:foo{mesh}", "'foo' is not one of CANN's executors"),
    ("allreduce:sole{meshthreeshot}", "'meshthreeshot' is not one of CANN's templates"),
    ("level0:NA;level1:XYZ", "algorithm 'XYZ' is not one of"),
    ("bcast=level0:NA;level1:NHR", "op 'bcast' is not one of"),
])
def test_malformed_hccl_algo_is_refused_naming_both_grammars(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        selector.check_hccl_algo(text)
    assert needle in str(exc.value) and "executor grammar" in str(exc.value) and "documented form" in str(exc.value)


# ---- HCCL_USE_NEW_SELECTOR=1: CANN's cost table ----------------------------------------------
def test_cost_table_is_canns() -> None:
    """The entries, their tuner-plugin names and CANN's costs (cost_model.cc / cost_table.cc)."""
    _, sel = selector.select_on(A2_1x8, 0, "allreduce", 64 * M // 4, FP32, new_selector=True)
    table = {e["algName"]: e for e in sel.entries}
    # one level: no parallel / sequence algorithm (multilevel_only); PipeLine* uncalibrated
    assert not any("Parallel" in n or "Sequence" in n or "PipeLine" in n for n in table)
    two = table["AicpuAllReduceSoleMeshTwoShot"]
    assert (two["engine"], two["executor"], two["template"]) == ("aicpu", "sole", "meshtwoshot")
    # TwoShot: A = 2 n / 56e9, B = n / 750e9 + 7 n / 483e9 (n = 1/8), C = 20 x 2 us; 64 MiB on the mesh
    # utilisation of 64 MiB (0.8475)
    n, d = 1 / 8, 64 * M
    want = (2 * n / 56e9 / 0.8475 + n / 750e9 + 7 * n / 483e9) * d + 40e-6
    assert two["cost"] == pytest.approx(want, rel=1e-5)
    assert table["AicpuAllReduceSoleNHRTwoShotMultiLink"]["engine"] == ""  # CANN's AlgoNameMapper cannot split it
    assert sel.cann == "AicpuAllReduceSoleMeshTwoShot"
    # 16 ranks: the mesh templates are uncalibrated (rankSize > 8)
    _, big = selector.select_on(A2_2x8, 0, "allreduce", 64 * M // 4, FP32, new_selector=True)
    assert "AicpuAllReduceSoleMeshTwoShot" not in {e["algName"] for e in big.entries}
    # reduce-scatter across servers with gcd 1: SoleNHR is a must-select (nhr_by_gcd)
    _, rs = selector.select_on(A2_3_5, 0, "reduce_scatter", 1 * M, FP32, new_selector=True)
    assert [e["algName"] for e in rs.entries] == ["AicpuReduceScatterSoleNHR"]


# ---- names --------------------------------------------------------------------------------------
def test_algorithm_names_and_aliases() -> None:
    for coll, table in ALGORITHMS.items():
        for name in table:
            assert resolve(coll, name) == name and resolve(coll, name.upper()) == name
    assert resolve("allreduce", "fastest") == "fastest" and resolve("allreduce", "AUTO") == "auto"
    for spelling in ("AicpuAllReduceSoleMeshTwoShot", "SoleMeshTwoShot", "meshtwoshot", "MESHTWOSHOT"):
        assert resolve("allreduce", spelling) == "AicpuAllReduceSoleMeshTwoShot"
    assert resolve("allreduce", "mesh") == "AicpuAllReduceSoleMeshOneShot"  # ALIASES
    assert resolve("allgather", "ParallelMeshNHR") == "AicpuAllGatherParallelMeshNHR"
    # CANN's name of an algorithm no kernel implements: the selection refuses it, naming the kernels
    assert resolve("allreduce", "AicpuAllReduceSoleMeshConcur") == "AicpuAllReduceSoleMeshConcur"
    with pytest.raises(ConfigError, match="CANN's algorithm AicpuAllReduceSoleMeshConcur has no built-in kernel"):
        selector.select_on(A2_1x8, 0, "allreduce", 1024, FP32, forced="AicpuAllReduceSoleMeshConcur")
    with pytest.raises(ConfigError, match="allreduce: unknown algorithm 'tree'"):
        resolve("allreduce", "tree")


def test_kernel_table_matches_algorithms() -> None:
    """The emulator's name -> OpParam.algo table (the C API's) is ALGORITHMS (the Python side's)."""
    got = {(k["collective"], k["name"]): k["id"] for k in selector.kernel_table()}
    want = {(coll, name): i for coll, t in ALGORITHMS.items() for name, i in t.items() if name != "auto"}
    want.update({(coll, alias): ALGORITHMS[coll][target] for coll, a in ALIASES.items() for alias, target in a.items()
                 if alias.startswith("Aicpu")})  # CANN's names a kernel stands for
    assert got == want


# ---- on communicators: the C API, and CANN's tuner plugin -----------------------------------------
import json  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from hcomm_kit.build import emulator  # noqa: E402

TESTS_C = Path(__file__).resolve().parent / "c"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def capi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("selector_capi") / "capi"
    cmd = ["g++", "-std=c++17", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread",
           str(TESTS_C / "selector" / "capi.cc"), *shlex.split(emulator.cflags()), *shlex.split(emulator.libs()),
           "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{shlex.join(cmd)}\n{res.stdout}{res.stderr}"
    return out


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/c/tuner/prefer.c: a CANN tuner plugin preferring $TUNER_PREFER (an algName or template)."""
    out = tmp_path_factory.mktemp("tuner") / "prefer.so"
    cmd = ["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{emulator.get_include()}",
           str(TESTS_C / "tuner" / "prefer.c"), "-o", str(out)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return out


def _capi(exe: Path, n: int, count: int, want: int, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("HCOMM_KIT_") or k == "HCOMM_KIT_CACHE_DIR"}
    e.update(HCOMM_KIT_SOC="Ascend910B", HCOMM_KIT_DEVICE_COUNT=str(n), HCCL_BUFFSIZE="4", HCCL_CONNECT_TIMEOUT="60",
             HCOMM_KIT_LOG="info", **env)
    return subprocess.run([str(exe), str(n), str(count), str(want)], env=e, capture_output=True, text=True, timeout=180)


def test_c_api_runs_canns_choice_and_fails_fast_on_a_downed_link(capi: Path, plugin: Path) -> None:
    """HcclAllReduce (4 ranks, one A2 server, 1 MiB) chooses what CANN's selector does, on every
    rank, logs it, and computes the sum (a tuner plugin is set but, without HCCL_USE_NEW_SELECTOR,
    never loaded, as in CANN); with the 0-1 link down every rank's call fails at once with
    HCCL_E_NETWORK naming the link, instead of rank 2 and 3 waiting for channels."""
    res = _capi(capi, 4, 262144, 0, HCOMM_KIT_TOPOLOGY="A2:1x4", HCCL_TUNER_PLUGIN=str(plugin),
                TUNER_PREFER="meshtwoshot")
    assert "prefer" not in res.stderr and "[Tuner]" not in res.stderr, res.stderr
    assert res.returncode == 0 and "PASS" in res.stdout, res.stdout + res.stderr
    sels = [json.loads(line.split(" ", 3)[3]) for line in res.stdout.splitlines() if line.startswith("SEL ")]
    assert len(sels) == 4 and all((s["cann"], s["source"]) == ("AicpuAllReduceSoleMeshOneShot",
                                                             "all_reduce_auto_selector.cc:545") for s in sels), sels
    assert "[Selector] allreduce of 1048576 bytes (fp32)" in res.stderr and "all_reduce_auto_selector.cc:545" in res.stderr
    t0 = time.monotonic()
    res = _capi(capi, 4, 262144, 19, HCOMM_KIT_TOPOLOGY="A2:1x4", HCOMM_KIT_LINKS_DOWN="0-1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert time.monotonic() - t0 < 30  # not HCCL_CONNECT_TIMEOUT (60 s)
    rcs = [line for line in res.stdout.splitlines() if line.startswith("RC ")]
    assert len(rcs) == 4 and all("AicpuAllReduceSoleMeshOneShot needs the HCCS link 0-1" in line and
                                 "which is down (HCOMM_KIT_LINKS_DOWN=0-1)" in line for line in rcs), rcs


_TUNER = """
import os

import numpy as np

import hcomm_kit
from hcomm_kit.ops.algorithms import ALGORITHMS, LEVELS

LEVELS_NAMES = {n for n, k in ALGORITHMS["allreduce"].items() if k in LEVELS}
new = comm = hcomm_kit.init()  # HCCL_USE_NEW_SELECTOR=1: read when a communicator is created, as CANN reads it
x = np.ones(262144, np.float32)  # 1 MiB
os.environ["TUNER_PREFER"] = "meshtwoshot"  # read by the plugin on every call
np.testing.assert_array_equal(new.all_reduce(x), x * comm.size)
s = new.last_selection
table = {e["algName"]: e for e in s.entries}
two = table["AicpuAllReduceSoleMeshTwoShot"]
assert (two["engine"], two["executor"], two["template"], two["cost"]) == ("aicpu", "sole", "meshtwoshot", 0.0), two
assert abs(two["model_cost"] - 0.0005) < 1e-9, two  # CANN's floor for AICPU algorithms
assert s.chosen == "AicpuAllReduceSoleMeshTwoShot" and s.tuner_matched and s.how.startswith("tuner plugin"), s
os.environ["TUNER_PREFER"] = "AicpuAllReduceSoleMeshOneShot"  # the table's own choice: nothing changes
new.all_reduce(x[:1000])  # another size: chosen anew
s = new.last_selection
assert s.chosen == "AicpuAllReduceSoleMeshOneShot" and not s.tuner_matched and s.how.startswith("cost table"), s
print("TUNER-OK", comm.rank, flush=True)

# algorithm="fastest": the kernels' algorithm the timing model predicts fastest for this call
y = np.arange(3 * 65536 + 5, dtype=np.float32)  # 768 KiB and a tail
modelled = {}
for name in ALGORITHMS["allreduce"]:
    if name == "auto" or name in LEVELS_NAMES:  # the multi-level ones apply across servers only
        continue
    np.testing.assert_array_equal(comm.all_reduce(y, algorithm=name), y * comm.size)
    modelled[name] = comm.last_model_time
np.testing.assert_array_equal(comm.all_reduce(y, algorithm="fastest"), y * comm.size)
s = comm.last_selection
best = min(modelled, key=modelled.get)
assert s.chosen == best and s.how.startswith("algorithm=fastest"), (s, modelled)
tried = dict(s.modelled)
assert set(tried) == set(modelled) and abs(tried[best] - modelled[best]) < 1e-6 * modelled[best], (tried, modelled)
print("FASTEST-OK", comm.rank, best, flush=True)
comm.close()
"""


def test_tuner_plugin_under_the_new_selector(tmp_path: Path, plugin: Path) -> None:
    """With HCCL_USE_NEW_SELECTOR=1, CANN's tuner plugin is shown CANN's cost table with CANN's
    names (engine, executor, template as AlgoNameMapper splits them), may change the choice, and
    "(tuner plugin matched)" is printed only when it did (the C API test: not consulted without).
    In the same job, ``algorithm="fastest"`` runs the algorithm whose forced run the timing model
    predicts fastest."""
    script = tmp_path / "tuner.py"
    script.write_text(_TUNER)
    trace = tmp_path / "trace.json"
    env = {k: v for k, v in os.environ.items() if k not in ("HCCL_USE_NEW_SELECTOR", "TUNER_PREFER", "HCCL_ALGO")}
    env.update(PYTHONPATH=str(REPO), HCOMM_KIT_LOG="info", HCCL_TUNER_PLUGIN=str(plugin), HCOMM_KIT_TRACE=str(trace),
               HCCL_USE_NEW_SELECTOR="1")
    env.pop("HCOMM_KIT_SOC", None)
    res = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "2", "--", sys.executable, str(script)],
                         env=env, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0 and out.count("TUNER-OK") == 2 and out.count("FASTEST-OK") == 2, out
    assert out.count("prefer init: nRanks=2 nServers=1 nNpusPerServer=2 nPods=0 nSuperPods=0") == 2, out
    assert "prefer sees AicpuAllReduceSoleMeshTwoShot: engine aicpu executor sole template meshtwoshot cost 0.0005" in out
    assert out.count("(tuner plugin matched)") == 1, out  # rank 0 logs; only the call whose choice changed
    assert "-> AicpuAllReduceSoleMeshTwoShot (tuner plugin (HCCL_USE_NEW_SELECTOR=1)" in out, out
    text = trace.read_text()
    assert '"chosen":"AicpuAllReduceSoleMeshTwoShot"' in text and '"tuner_matched":1' in text
