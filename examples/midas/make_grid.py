"""pandapower's CIGRE MV grid with its PV and wind units, as a grid file MIDAS can load.

pandapower's ``create_cigre_network_mv(with_der="pv_wind")`` leaves the units' reactive-power
limits empty, and MIDAS then offers no ``q_mvar`` actuator for them. This gives each unit the
range of a power factor of 0.9 (``+-sn_mva * tan(acos 0.9)``) and writes the grid as JSON:

    python examples/midas/make_grid.py [OUT.json]     # default: cigre_mv_pv_wind.json here

Nothing is downloaded: the grid ships with pandapower.
"""

from __future__ import annotations

import math
import sys


def build(path: str) -> int:
    import pandapower as pp
    import pandapower.networks as pn

    net = pn.create_cigre_network_mv(with_der="pv_wind")
    q_share = math.tan(math.acos(0.9))
    net.sgen["max_q_mvar"] = net.sgen["sn_mva"] * q_share
    net.sgen["min_q_mvar"] = -net.sgen["sn_mva"] * q_share
    net.sgen["controllable"] = True
    pp.to_json(net, path)
    return len(net.sgen)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "cigre_mv_pv_wind.json"
    print(f"wrote {out}: {build(out)} PV and wind units")
