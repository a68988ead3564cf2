"""How a system under test is reached: the wire protocol (protocol.py), the one channel rule every
adapter keeps (channel.py: deadlines, restarts, the launcher's report), and one module per way in --
a Python entry point in process (inprocess.py), a command or an HTTP server (external.py), a LangChain
or LlamaIndex retriever (frameworks.py), an MCP memory server (mcp*.py). An adapter opens channels;
it never decides how a system is confined (bench.systems.sandbox) or what its answers are worth
(bench.systems.credit, bench.gold)."""
