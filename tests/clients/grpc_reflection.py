#!/usr/bin/env python3
"""A generic gRPC client that knows nothing of the server but what reflection tells it,
as grpcurl works: no .proto file, no generated code.

Run by tests/clients_grpc_reflection.rs with PYTHONPATH=.tools/python-grpc (grpcio,
grpcio-reflection and protobuf, installed by scripts/install-clients.sh). Usage:

    grpc_reflection.py [--timeout S] [--max-messages N] ADDRESS list
    grpc_reflection.py [--timeout S] [--max-messages N] ADDRESS describe SYMBOL
    grpc_reflection.py [--timeout S] [--max-messages N] ADDRESS call METHOD JSON
    grpc_reflection.py [--timeout S] [--max-messages N] ADDRESS health [SERVICE]

ADDRESS is host:port, plaintext. METHOD is `package.Service/Method` (or
`package.Service.Method`); JSON is the request in the proto3 JSON mapping, and each
response message is printed in it (lowerCamelCase names, fields with default values
left out, int64 as strings, bytes as base64), as grpcurl prints them.

The server's descriptors come from its reflection service
(ProtoReflectionDescriptorDatabase) into a DescriptorPool; message classes are made
from them (message_factory.GetMessageClass), requests parsed from JSON and responses
printed as JSON (json_format).

Every result is one JSON document per line on stdout:
    {"op": "services", "services": [...]}                       list
    {"op": "describe", "symbol": ..., "kind": ..., "text": ...}  describe
    {"op": "message", "message": {...}}                          call, once per response
    {"op": "health", "service": ..., "status": "SERVING"}        health
then {"op": "done", ...}; a failure is {"op": "error", "message": ...} and a non-zero
exit. Every wait is bounded: every RPC (reflection included) has the run's deadline,
--timeout seconds from the start; a server stream is cancelled after --max-messages
messages; an alarm ends the run shortly after the deadline whatever happens.
"""

import argparse
import collections
import json
import math
import os
import signal
import sys
import time
import traceback

# Seconds past --timeout after which the alarm ends the run, whatever it is doing.
ALARM_GRACE = 5


def emit(**fields):
    """Prints one result line and flushes it, so the test sees it at once."""
    print(json.dumps(fields, sort_keys=True), flush=True)


def fail(message, code=2):
    emit(op="error", message=message)
    sys.exit(code)


def on_alarm(_signum, _frame):
    emit(op="error", message="run limit exceeded")
    # Out at once: the main thread may be inside a gRPC call.
    os._exit(3)


# This file is named as the grpcio-reflection package (grpc_reflection): its folder, which
# Python puts first on the import path, must not hide the package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

try:
    import grpc
    from google.protobuf import descriptor_pool, json_format, message_factory
    from google.protobuf.descriptor import FieldDescriptor
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )
except ImportError as e:  # pragma: no cover - reported to the Rust test
    fail(f"cannot import grpcio, grpcio-reflection or protobuf ({e}); run scripts/install-clients.sh", 4)


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


class RunDeadline(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Gives every call on the channel, the reflection client's too, what is left of the
    run's deadline as its timeout."""

    def __init__(self, deadline):
        self.deadline = deadline

    def _details(self, d):
        left = max(0.001, self.deadline - time.monotonic())
        timeout = left if d.timeout is None else min(d.timeout, left)
        return _CallDetails(d.method, timeout, d.metadata, d.credentials, d.wait_for_ready, d.compression)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._details(details), requests)


class Reflected:
    """The server's services and messages, as its reflection service describes them."""

    def __init__(self, channel):
        self.channel = channel
        self.db = ProtoReflectionDescriptorDatabase(channel)
        self.pool = descriptor_pool.DescriptorPool(self.db)

    def services(self):
        return sorted(self.db.get_services())

    def lookup(self, symbol):
        """(kind, descriptor) of the service, method, message or enum `symbol` names;
        None if the server knows no such thing.

        The file is asked for by the symbol, or by its parent for a method (the Python
        descriptor database does not index methods), then searched; the pool's own
        FindServiceByName and the like would ask the database again for a symbol of
        another kind, and fail on a file it already holds."""
        parent = symbol.rpartition(".")[0]
        for name in (symbol, parent):
            if not name:
                continue
            try:
                file = self.pool.FindFileContainingSymbol(name)
            except (KeyError, TypeError):
                continue
            except grpc.RpcError as e:
                # tonic's reflection ends the stream NOT_FOUND instead of answering an
                # ErrorResponse (which the database turns into a KeyError).
                if e.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                continue
            found = find_in_file(file, symbol)
            if found is not None:
                return found
        return None

    def method(self, name):
        """The method descriptor of `pkg.Service/Method` or `pkg.Service.Method`."""
        service, sep, method = name.partition("/")
        if not sep:
            service, _, method = name.rpartition(".")
        if not service or not method:
            fail(f"not a method name: {name!r} (want package.Service/Method)")
        found = self.lookup(service)
        if found is None or found[0] != "service":
            fail(f"the server has no service {service!r}")
        m = found[1].methods_by_name.get(method)
        if m is None:
            fail(f"service {service} has no method {method!r}")
        return m

    def message_class(self, descriptor):
        return message_factory.GetMessageClass(descriptor)

    def to_json(self, message):
        return json_format.MessageToDict(message, descriptor_pool=self.pool)

    def from_json(self, descriptor, text):
        request = self.message_class(descriptor)()
        json_format.Parse(text, request, descriptor_pool=self.pool)
        return request

    def call(self, method, request, max_messages):
        """Sends `request`; yields each response message (at most `max_messages` of a
        server stream, which is then cancelled)."""
        path = f"/{method.containing_service.full_name}/{method.name}"
        response_class = self.message_class(method.output_type)
        serialize = type(request).SerializeToString
        deserialize = response_class.FromString
        if method.client_streaming:
            fail(f"{method.full_name} is client-streaming: this client sends one request only")
        if not method.server_streaming:
            rpc = self.channel.unary_unary(path, request_serializer=serialize, response_deserializer=deserialize)
            yield rpc(request)
            return
        rpc = self.channel.unary_stream(path, request_serializer=serialize, response_deserializer=deserialize)
        stream = rpc(request)
        count = 0
        try:
            for response in stream:
                yield response
                count += 1
                if count >= max_messages:
                    break
        finally:
            stream.cancel()


def find_in_file(file, symbol):
    """(kind, descriptor) of `symbol` among the services, methods, messages (nested ones
    too) and enums of `file`; None if it is not there."""
    for service in file.services_by_name.values():
        if service.full_name == symbol:
            return "service", service
        for method in service.methods:
            if method.full_name == symbol:
                return "method", method
    messages = list(file.message_types_by_name.values())
    enums = list(file.enum_types_by_name.values())
    while messages:
        message = messages.pop()
        if message.full_name == symbol:
            return "message", message
        messages.extend(message.nested_types)
        enums.extend(message.enum_types)
    for enum in enums:
        if enum.full_name == symbol:
            return "enum", enum
    return None


def rpc_signature(method):
    def side(streaming, descriptor):
        return ("stream " if streaming else "") + "." + descriptor.full_name

    return (
        f"rpc {method.name} ( {side(method.client_streaming, method.input_type)} ) "
        f"returns ( {side(method.server_streaming, method.output_type)} );"
    )


def field_type(field):
    if field.message_type is not None:
        entry = field.message_type
        if entry.GetOptions().map_entry:
            k, v = entry.fields_by_name["key"], entry.fields_by_name["value"]
            return f"map<{field_type(k)}, {field_type(v)}>"
        return "." + entry.full_name
    if field.enum_type is not None:
        return "." + field.enum_type.full_name
    names = {
        getattr(FieldDescriptor, n): n[len("TYPE_"):].lower()
        for n in dir(FieldDescriptor)
        if n.startswith("TYPE_")
    }
    return names[field.type]


def field_line(field):
    label = ""
    if field.message_type is None or not field.message_type.GetOptions().map_entry:
        if field.is_repeated:
            label = "repeated "
        elif field.containing_oneof is not None and field.containing_oneof.name == "_" + field.name:
            # proto3 `optional`: a synthetic oneof of its own.
            label = "optional "
    return f"{label}{field_type(field)} {field.name} = {field.number};"


def describe(reflected, symbol):
    """Finds `symbol` (a service, method, message or enum) and emits its description: a
    text in .proto form, as grpcurl prints it, and the same as fields."""
    found = reflected.lookup(symbol.lstrip("."))
    if found is None:
        fail(f"the server knows no service, method, message or enum {symbol!r}")
    kind, d = found
    if kind == "service":
        lines = [f"service {d.name} {{"] + [f"  {rpc_signature(m)}" for m in d.methods] + ["}"]
        details = {
            "methods": [
                {
                    "name": m.name,
                    "input": m.input_type.full_name,
                    "output": m.output_type.full_name,
                    "clientStreaming": m.client_streaming,
                    "serverStreaming": m.server_streaming,
                }
                for m in d.methods
            ]
        }
    elif kind == "method":
        lines = [rpc_signature(d)]
        details = {"input": d.input_type.full_name, "output": d.output_type.full_name}
    elif kind == "message":
        lines = [f"message {d.name} {{"] + [f"  {field_line(f)}" for f in d.fields] + ["}"]
        details = {"fields": [{"name": f.name, "jsonName": f.json_name, "number": f.number} for f in d.fields]}
    else:
        lines = [f"enum {d.name} {{"] + [f"  {v.name} = {v.number};" for v in d.values] + ["}"]
        details = {"values": [v.name for v in d.values]}
    text = f"{d.full_name} is a {kind}:\n" + "\n".join(lines)
    emit(op="describe", symbol=d.full_name, kind=kind, text=text, **details)


def parse_args(argv):
    parser = argparse.ArgumentParser(description="A gRPC client driven by server reflection.")
    parser.add_argument("--timeout", type=float, default=10.0, help="deadline of the whole run, seconds")
    parser.add_argument("--max-messages", type=int, default=100, help="messages read of a server stream")
    parser.add_argument("address", help="host:port, plaintext")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list")
    d = sub.add_parser("describe")
    d.add_argument("symbol")
    c = sub.add_parser("call")
    c.add_argument("method")
    c.add_argument("json")
    h = sub.add_parser("health")
    h.add_argument("service", nargs="?", default="")
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.max_messages <= 0:
        parser.error("--timeout and --max-messages must be positive")
    return args


def main(argv):
    args = parse_args(argv)
    deadline = time.monotonic() + args.timeout
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(math.ceil(args.timeout) + ALARM_GRACE)
    emit(op="client", grpcio=grpc.__version__, python=sys.version.split()[0])
    with grpc.insecure_channel(args.address) as plain:
        channel = grpc.intercept_channel(plain, RunDeadline(deadline))
        reflected = Reflected(channel)
        if args.command == "list":
            emit(op="services", services=reflected.services())
            emit(op="done")
        elif args.command == "describe":
            describe(reflected, args.symbol)
            emit(op="done")
        elif args.command == "call":
            method = reflected.method(args.method)
            try:
                request = reflected.from_json(method.input_type, args.json)
            except json_format.ParseError as e:
                fail(f"the request is not a {method.input_type.full_name} in JSON: {e}")
            count = 0
            for response in reflected.call(method, request, args.max_messages):
                emit(op="message", message=reflected.to_json(response))
                count += 1
            emit(op="done", messages=count)
        elif args.command == "health":
            method = reflected.method("grpc.health.v1.Health/Check")
            request = reflected.from_json(method.input_type, json.dumps({"service": args.service}))
            (response,) = reflected.call(method, request, 1)
            status = reflected.to_json(response).get("status", "UNKNOWN")
            emit(op="health", service=args.service, status=status)
            emit(op="done")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except SystemExit:
        raise
    except grpc.RpcError as e:
        code = e.code() if hasattr(e, "code") else None
        details = e.details() if hasattr(e, "details") else str(e)
        fail(f"gRPC error {code.name if code else '?'}: {details}")
    except Exception as e:  # noqa: BLE001 - any failure is reported as a JSON line
        fail(f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
