"""The discrete-event simulator as an engine and rooms (docs/simulator.md, "Architecture").

`engine` owns the clock, the event timeline and the order of one instant; each room owns one concern's state and
is reached only through the methods the engine wires together: `admission` (arrivals, jobs, the DAG gate),
`cycle` (the scheduling queue and pass), `runtime` (binding, starting and stopping pods), `slots` (running pods
as array rows), `clocks` (CPU sharing and progress clocks), `usage` (usage resampling and real usage series),
`qos` (reclaimed resources, suppression, evictions), `traffic` (links and cross-node bytes), `relocation`
(migrations and eviction restarts) and `accounting` (metrics). `config` and `entities` are the shared vocabulary;
`ports` the interfaces rooms type their collaborators with.
"""
