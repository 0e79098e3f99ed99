"""Report sections shared by several methods."""
from netrig.methodology.method import Section

#: The methods with a table each and no plot of their own in single-run reports.
OTHER_METHODS = Section("other-methods", "Back-to-back, system recovery, reset, fixed rate",
                        compare_title="Fixed rate (iperf-like)")
