"""Amaranth testbench steps for the byte streams of the gateware's host side: wait for a signal,
drive bytes into a stream sink, send commands to a core and wait for their replies, gather the
records a stream of record bytes carries.

Each is a coroutine for ``Simulator.add_testbench`` (``ctx`` is its context)::

    async def host(ctx):
        await send_commands(ctx, dut, [(Opcode.ARM, b"\\x01")], state)
"""

from latscope.gateware.codec import encode_command

__all__ = ["until_high", "send_bytes", "send_commands", "record_collector"]


async def until_high(ctx, signal, domain="sync"):
    """Tick until ``signal`` is 1 at a clock edge (like ``tick().until()``, but safe to abandon
    when a background testbench is stopped at the end of a simulation)."""
    while True:
        *_, value = await ctx.tick(domain).sample(signal)
        if value:
            return


async def send_bytes(ctx, sink, data, domain="sync"):
    """Drive ``data`` into ``sink`` (a ``stream.Signature`` sink of bytes: ``payload``,
    ``valid``, ``ready``), one byte per transfer, back to back; ``valid`` is low after it."""
    for byte in data:
        ctx.set(sink.payload, byte)
        ctx.set(sink.valid, 1)
        await ctx.tick(domain).until(sink.ready)
    ctx.set(sink.valid, 0)


async def send_commands(ctx, dut, commands, state, *, after_command=None, domain="sync"):
    """Send each of ``commands`` (``(opcode, args)``, sequence numbers 0, 1, ...) to ``dut.rx``
    and wait until ``state["replies"]`` (counted by the test's sink of ``dut.tx``) holds its
    reply; then ``after_command(n, state)``, if given."""
    for n, (opcode, args) in enumerate(commands):
        await send_bytes(ctx, dut.rx, encode_command(n, opcode, args), domain)
        while state["replies"] <= n:
            await ctx.tick(domain)
        if after_command:
            after_command(n, state)


def record_collector(records, out, domain="sync"):
    """A process for ``Simulator.add_process`` that appends every record ``records`` carries (a
    stream of :class:`~latscope.gateware.framer.RecordByte`: ``type``, ``length``, ``data``,
    one byte per transfer) to ``out`` as ``(type, payload bytes)``."""
    async def collect(ctx):
        current = bytearray()
        async for _, _, valid, ready, payload in ctx.tick(domain).sample(
                records.valid, records.ready, records.payload):
            if valid and ready:
                current.append(payload.data)
                if len(current) == payload.length:
                    out.append((payload.type, bytes(current)))
                    current = bytearray()
    return collect
