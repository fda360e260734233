#!/usr/bin/python3
"""Server reflection of sluice, used the way grpcurl uses it, by a stock
python3-grpcio 1.51 + python3-protobuf client.

    test_reflection_py.py --greeter GREETER_SERVER --interop INTEROP_SERVER
                          --peer REFLECTION_PEER

For both grpc.reflection.v1 and v1alpha, on one ServerReflectionInfo
stream per server:
1. list_services names the application's services and the library's own
   (grpc.health.v1.Health, both reflection services).
2. file_containing_symbol of the service returns its file and its
   transitive imports (interop: test.proto needs empty.proto and
   messages.proto); the files go into a fresh descriptor_pool, the method's
   request is built from JSON (json_format) with message classes made from
   the fetched descriptors alone, the method is called, and the reply is
   decoded and checked (Greeter: "Hello <name>"; interop UnaryCall: the
   asked payload size).
3. An unknown symbol / file / extension gets an error_response NOT_FOUND,
   and the same stream then still answers (the stream is not ended).
4. file_by_filename, a method, a nested message and an enum value resolve;
   all_extension_numbers_of_type of a message without extensions is an
   empty list; the health service's own descriptor drives a Check call.
5. --no-reflection: UNIMPLEMENTED.
6. reflection_peer (tests/interop/reflection_peer.c, reflecttest.proto:
   proto2 extensions of its own message, top-level and nested, and a
   (sluice.method) option): the service's file comes with
   sluice/options.proto and google/protobuf/descriptor.proto;
   file_containing_extension finds both extensions' file;
   all_extension_numbers_of_type lists 100 and 150; the extension and
   nested enum symbols resolve; the call built from the fetched
   descriptors works.
7. Bad input: undecodable bytes fail that stream (not the server); an
   empty request gets INVALID_ARGUMENT in-stream; 200 requests written
   before any answer is read are all answered, in order; so are 1600
   large ones (4.6 MB).
Each server is then stopped with SIGTERM and must exit 0 (under ASan: no
error or leak report).

The reflection messages come from protoc --python_out of the library's
copies of reflection.proto (proto/grpc/reflection/), the same field
numbers as grpc's. Nothing here depends on timing; every call has a
generous deadline. Exits 0, 1 on a failed check, 77 without grpc.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import interop_common  # noqa: E402
from interop_common import Checks, Server  # noqa: E402

try:
    import grpc
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf import json_format, message_factory
except ImportError:
    print("skip: no grpc or protobuf module")
    sys.exit(77)

PROTO_DIR = os.path.join(HERE, "..", "..", "proto")
DEADLINE = 30.0
NOT_FOUND = 5


_loaded = {}


def load_reflection(version):
    """reflection_pb2 of grpc.reflection.<version>, generated under its
    full path (the two versions' files must not share a name in the
    default pool) and imported under a name of its own."""
    if version in _loaded:
        return _loaded[version]
    import atexit
    import importlib.util
    import shutil
    import subprocess
    import tempfile
    rel = "grpc/reflection/%s/reflection.proto" % version
    out = tempfile.mkdtemp(prefix="sluice-reflection-")
    atexit.register(shutil.rmtree, out, True)
    protoc = os.environ.get("PROTOC") or "protoc"
    subprocess.run([protoc, "-I", PROTO_DIR, "--python_out", out, rel],
                   check=True, timeout=60)
    path = os.path.join(out, rel.replace(".proto", "_pb2.py"))
    spec = importlib.util.spec_from_file_location(
        "sluice_reflection_%s_pb2" % version, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _loaded[version] = mod
    return mod


def message_class(pool, full_name):
    desc = pool.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


class Reflector:
    """One ServerReflectionInfo stream, asked one request at a time."""

    def __init__(self, channel, pb, version):
        self.pb = pb
        self.requests = []
        self.call = channel.stream_stream(
            "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo"
            % version,
            request_serializer=pb.ServerReflectionRequest.SerializeToString,
            response_deserializer=pb.ServerReflectionResponse.FromString)
        import queue
        self.q = queue.Queue()
        self.responses = self.call(iter(self.q.get, None), timeout=DEADLINE)

    def ask(self, **kw):
        req = self.pb.ServerReflectionRequest(host="localhost", **kw)
        self.q.put(req)
        resp = next(self.responses)
        return req, resp

    def close(self):
        self.q.put(None)
        rest = list(self.responses)
        return rest


def add_files(pool, blobs):
    """Adds FileDescriptorProtos (bytes) to pool, imports first."""
    protos = {}
    for b in blobs:
        fd = descriptor_pb2.FileDescriptorProto.FromString(b)
        protos[fd.name] = fd
    done = set()

    def add(name):
        if name in done or name not in protos:
            return
        done.add(name)
        for dep in protos[name].dependency:
            add(dep)
        pool.Add(protos[name])

    for name in protos:
        add(name)
    return protos


def run_server_checks(c, ap_args, version, server_kind):
    pb = load_reflection(version)
    tag = "%s/%s" % (server_kind, version)
    cmd = ap_args.greeter if server_kind == "greeter" else ap_args.interop
    with Server([cmd, "--port", "0", "--host", "127.0.0.1"]) as srv:
        channel = grpc.insecure_channel(srv.target)
        r = Reflector(channel, pb, version)

        # 1. list_services
        req, resp = r.ask(list_services="*")
        names = sorted(s.name for s in resp.list_services_response.service)
        app = ("helloworld.Greeter" if server_kind == "greeter"
               else "grpc.testing.TestService")
        want = {app, "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection"}
        c.check(tag + " list_services", want <= set(names) and
                len(names) == len(set(names)), repr(names))
        c.check(tag + " valid_host and original_request",
                resp.valid_host == "localhost" and
                resp.original_request == req, str(resp.original_request))

        # 3. unknown symbol: NOT_FOUND, in the stream
        _, resp = r.ask(file_containing_symbol="no.such.Service")
        c.check(tag + " unknown symbol NOT_FOUND",
                resp.WhichOneof("message_response") == "error_response" and
                resp.error_response.error_code == NOT_FOUND,
                str(resp))

        # 2. the service's file with its imports; a call built from them
        _, resp = r.ask(file_containing_symbol=app)
        blobs = list(resp.file_descriptor_response.file_descriptor_proto)
        pool = descriptor_pool.DescriptorPool()
        try:
            protos = add_files(pool, blobs)
        except Exception as e:  # noqa: BLE001
            c.check(tag + " descriptors build a pool", False, repr(e))
            return
        if server_kind == "greeter":
            c.check(tag + " symbol's file", list(protos) ==
                    ["helloworld.proto"], repr(list(protos)))
            svc = pool.FindServiceByName("helloworld.Greeter")
            m = svc.FindMethodByName("SayHello")
            body = {"name": "reflection"}
        else:
            c.check(tag + " symbol's file and transitive imports",
                    sorted(protos) == ["grpc/testing/empty.proto",
                                       "grpc/testing/messages.proto",
                                       "grpc/testing/test.proto"] and
                    blobs and descriptor_pb2.FileDescriptorProto.FromString(
                        blobs[0]).name == "grpc/testing/test.proto",
                    repr(list(protos)))
            svc = pool.FindServiceByName("grpc.testing.TestService")
            m = svc.FindMethodByName("UnaryCall")
            body = {"responseSize": 7, "fillUsername": False}
        ReqCls = message_class(pool, m.input_type.full_name)
        RespCls = message_class(pool, m.output_type.full_name)
        request = json_format.Parse(json.dumps(body), ReqCls())
        call = channel.unary_unary(
            "/%s/%s" % (svc.full_name, m.name),
            request_serializer=ReqCls.SerializeToString,
            response_deserializer=RespCls.FromString)
        reply = call(request, timeout=DEADLINE)
        got = json_format.MessageToDict(reply)
        if server_kind == "greeter":
            c.check(tag + " call built from the descriptors",
                    got.get("message") == "Hello reflection", repr(got))
        else:
            c.check(tag + " call built from the descriptors",
                    len(reply.payload.body) == 7, repr(got))

        # 3'. the same stream still answers after errors
        _, resp = r.ask(file_by_filename="no/such/file.proto")
        c.check(tag + " unknown file NOT_FOUND",
                resp.error_response.error_code == NOT_FOUND, str(resp))
        _, resp = r.ask(file_containing_extension=pb.ExtensionRequest(
            containing_type="no.such.Message", extension_number=100))
        c.check(tag + " unknown extension NOT_FOUND",
                resp.error_response.error_code == NOT_FOUND, str(resp))

        # 4. other lookups
        fname = ("helloworld.proto" if server_kind == "greeter"
                 else "grpc/testing/messages.proto")
        _, resp = r.ask(file_by_filename=fname)
        got = [descriptor_pb2.FileDescriptorProto.FromString(b).name for b in
               resp.file_descriptor_response.file_descriptor_proto]
        c.check(tag + " file_by_filename", got[:1] == [fname], repr(got))
        method = app + "." + ("SayHello" if server_kind == "greeter"
                              else "StreamingOutputCall")
        _, resp = r.ask(file_containing_symbol=method)
        c.check(tag + " method symbol",
                resp.WhichOneof("message_response") ==
                "file_descriptor_response", str(resp)[:200])
        if server_kind == "interop":
            for sym in ("grpc.testing.SimpleRequest", "grpc.testing.Payload",
                        "grpc.testing.PayloadType",
                        "grpc.testing.COMPRESSABLE"):
                _, resp = r.ask(file_containing_symbol=sym)
                got = [descriptor_pb2.FileDescriptorProto.FromString(b).name
                       for b in
                       resp.file_descriptor_response.file_descriptor_proto]
                c.check(tag + " symbol " + sym,
                        got[:1] == ["grpc/testing/messages.proto"], str(resp))
        msg_type = ("helloworld.HelloRequest" if server_kind == "greeter"
                    else "grpc.testing.SimpleRequest")
        _, resp = r.ask(all_extension_numbers_of_type=msg_type)
        en = resp.all_extension_numbers_response
        c.check(tag + " all_extension_numbers_of_type (none)",
                resp.WhichOneof("message_response") ==
                "all_extension_numbers_response" and
                en.base_type_name == msg_type and
                list(en.extension_number) == [], str(resp))
        _, resp = r.ask(all_extension_numbers_of_type="no.such.Type")
        c.check(tag + " all_extension_numbers_of_type unknown NOT_FOUND",
                resp.error_response.error_code == NOT_FOUND, str(resp))

        # the library's own health service, through its own descriptor
        _, resp = r.ask(file_containing_symbol="grpc.health.v1.Health")
        hpool = descriptor_pool.DescriptorPool()
        add_files(hpool,
                  resp.file_descriptor_response.file_descriptor_proto)
        hsvc = hpool.FindServiceByName("grpc.health.v1.Health")
        hm = hsvc.FindMethodByName("Check")
        HReq = message_class(hpool, hm.input_type.full_name)
        HResp = message_class(hpool, hm.output_type.full_name)
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=HReq.SerializeToString,
            response_deserializer=HResp.FromString)
        hr = check(json_format.Parse('{"service": "%s"}' % app, HReq()),
                   timeout=DEADLINE)
        c.check(tag + " health Check from its reflected descriptor",
                json_format.MessageToDict(hr).get("status") == "SERVING",
                str(hr))
        # reflection describes itself
        _, resp = r.ask(file_containing_symbol="grpc.reflection.%s."
                        "ServerReflection" % version)
        got = [descriptor_pb2.FileDescriptorProto.FromString(b).name for b in
               resp.file_descriptor_response.file_descriptor_proto]
        c.check(tag + " reflection's own descriptor",
                got == ["grpc/reflection/%s/reflection.proto" % version],
                repr(got))

        rest = r.close()
        c.check(tag + " stream ends OK after half-close", rest == [] and
                r.responses.code() == grpc.StatusCode.OK,
                str(r.responses.code()))
        channel.close()
        # SIGTERM: a clean exit (0; under ASan also no leak report).
        rc = srv.stop(timeout=60.0)
        c.check(tag + " server exits cleanly", rc == 0, "exit %r" % rc)


def run_bad_input(c, ap_args):
    """Undecodable bytes end that stream with an error status (the server
    lives on); an empty request is answered INVALID_ARGUMENT in-stream; 200
    requests sent before any is read are all answered, in order."""
    pb = load_reflection("v1")
    with Server([ap_args.greeter, "--port", "0", "--host", "127.0.0.1"]) \
            as srv:
        channel = grpc.insecure_channel(srv.target)
        raw = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b)
        try:
            list(raw(iter([b"\x0a\xff\xff\xff\xff\x0f"]),
                     timeout=DEADLINE))
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        c.check("bad input: undecodable request fails the stream",
                code not in (grpc.StatusCode.OK,
                             grpc.StatusCode.DEADLINE_EXCEEDED), str(code))
        r = Reflector(channel, pb, "v1")
        _, resp = r.ask()
        c.check("bad input: empty request INVALID_ARGUMENT in-stream",
                resp.error_response.error_code == 3, str(resp))
        n = 200
        for i in range(n):
            r.q.put(pb.ServerReflectionRequest(
                file_containing_symbol="nope.%d" % i if i % 2 else
                "helloworld.Greeter"))
        ok = True
        for i in range(n):
            resp = next(r.responses)
            want = "nope.%d" % i if i % 2 else "helloworld.Greeter"
            ok = ok and resp.original_request.file_containing_symbol == want
            ok = ok and ((resp.error_response.error_code == NOT_FOUND)
                         if i % 2 else
                         len(resp.file_descriptor_response
                             .file_descriptor_proto) == 1)
        c.check("bad input: %d pipelined requests answered in order" % n, ok)
        rest = r.close()
        c.check("bad input: stream still ends OK", rest == [] and
                r.responses.code() == grpc.StatusCode.OK,
                str(r.responses.code()))
        channel.close()
        rc = srv.stop(timeout=60.0)
        c.check("bad input: server exits cleanly", rc == 0, "exit %r" % rc)
    # Larger answers (test.proto with its imports, about 3 KB each), 1600
    # of them (4.6 MB) written before any is read: all come, in order.
    # (grpcio reads ahead into its own buffers, so this does not reliably
    # fill sluice's send queue; the paused-requests path is not known to
    # be exercised here.)
    with Server([ap_args.interop, "--port", "0", "--host", "127.0.0.1"]) \
            as srv:
        channel = grpc.insecure_channel(srv.target)
        r = Reflector(channel, pb, "v1")
        n = 1600
        for i in range(n):
            r.q.put(pb.ServerReflectionRequest(
                host=str(i), file_containing_symbol="grpc.testing.TestService"))
        ok, size = True, 0
        for i in range(n):
            resp = next(r.responses)
            files = resp.file_descriptor_response.file_descriptor_proto
            size += sum(len(f) for f in files)
            ok = ok and resp.valid_host == str(i) and len(files) == 3
        c.check("back-pressure: %d large answers, in order" % n, ok)
        c.check("back-pressure: %d bytes of answers" % size,
                size > 4 * 1024 * 1024)
        rest = r.close()
        c.check("back-pressure: stream ends OK", rest == [] and
                r.responses.code() == grpc.StatusCode.OK,
                str(r.responses.code()))
        channel.close()
        rc = srv.stop(timeout=60.0)
        c.check("back-pressure: server exits cleanly", rc == 0,
                "exit %r" % rc)


def run_disabled(c, ap_args):
    pb = load_reflection("v1")
    with Server([ap_args.greeter, "--port", "0", "--host", "127.0.0.1",
                 "--no-reflection"]) as srv:
        channel = grpc.insecure_channel(srv.target)
        r = Reflector(channel, pb, "v1")
        try:
            r.ask(list_services="")
            code = None
        except grpc.RpcError as e:
            code = e.code()
        c.check("--no-reflection: UNIMPLEMENTED",
                code == grpc.StatusCode.UNIMPLEMENTED, str(code))
        channel.close()
        rc = srv.stop(timeout=60.0)
        c.check("--no-reflection: server exits cleanly", rc == 0,
                "exit %r" % rc)


def run_extensions(c, ap_args):
    for version in ("v1", "v1alpha"):
        pb = load_reflection(version)
        tag = "peer/" + version
        with Server([ap_args.peer, "--port", "0"]) as srv:
            channel = grpc.insecure_channel(srv.target)
            r = Reflector(channel, pb, version)
            _, resp = r.ask(file_containing_symbol="reflecttest.Reflected")
            blobs = list(resp.file_descriptor_response.file_descriptor_proto)
            names = [descriptor_pb2.FileDescriptorProto.FromString(b).name
                     for b in blobs]
            c.check(tag + " file with sluice/options.proto and descriptor",
                    names == ["reflecttest.proto", "sluice/options.proto",
                              "google/protobuf/descriptor.proto"],
                    repr(names))
            pool = descriptor_pool.DescriptorPool()
            add_files(pool, blobs)
            for num in (100, 150):
                _, resp = r.ask(file_containing_extension=pb.ExtensionRequest(
                    containing_type="reflecttest.Base",
                    extension_number=num))
                got = [descriptor_pb2.FileDescriptorProto.FromString(b).name
                       for b in
                       resp.file_descriptor_response.file_descriptor_proto]
                c.check(tag + " file_containing_extension %d" % num,
                        got[:1] == ["reflecttest.proto"], str(resp))
            _, resp = r.ask(file_containing_extension=pb.ExtensionRequest(
                containing_type="reflecttest.Base", extension_number=101))
            c.check(tag + " unknown extension number NOT_FOUND",
                    resp.error_response.error_code == NOT_FOUND, str(resp))
            _, resp = r.ask(all_extension_numbers_of_type="reflecttest.Base")
            en = resp.all_extension_numbers_response
            c.check(tag + " all_extension_numbers_of_type",
                    en.base_type_name == "reflecttest.Base" and
                    sorted(en.extension_number) == [100, 150], str(resp))
            # sluice/options.proto extends MethodOptions: found by the
            # options file's own descriptor
            _, resp = r.ask(all_extension_numbers_of_type=
                            "google.protobuf.MethodOptions")
            en = resp.all_extension_numbers_response
            c.check(tag + " MethodOptions extended by sluice/options.proto",
                    len(en.extension_number) >= 1, str(resp))
            for sym in ("reflecttest.top_ext", "reflecttest.Holder.nested_ext",
                        "reflecttest.Base.Inner.Kind",
                        "reflecttest.Base.Inner.KIND_B",
                        ".reflecttest.Reflected.Say"):
                _, resp = r.ask(file_containing_symbol=sym)
                got = [descriptor_pb2.FileDescriptorProto.FromString(b).name
                       for b in
                       resp.file_descriptor_response.file_descriptor_proto]
                c.check(tag + " symbol " + sym,
                        got[:1] == ["reflecttest.proto"], str(resp))
            ext = pool.FindExtensionByName("reflecttest.Holder.nested_ext")
            c.check(tag + " extension in the pool",
                    ext.number == 150 and
                    ext.containing_type.full_name == "reflecttest.Base", "")
            svc = pool.FindServiceByName("reflecttest.Reflected")
            m = svc.FindMethodByName("Say")
            EchoCls = message_class(pool, m.input_type.full_name)
            call = channel.unary_unary(
                "/reflecttest.Reflected/Say",
                request_serializer=EchoCls.SerializeToString,
                response_deserializer=EchoCls.FromString)
            reply = call(json_format.Parse('{"text": "ext"}', EchoCls()),
                         timeout=DEADLINE)
            c.check(tag + " call built from the descriptors",
                    reply.text == "ext", str(reply))
            r.close()
            channel.close()
            rc = srv.stop(timeout=60.0)
            c.check(tag + " server exits cleanly", rc == 0, "exit %r" % rc)


def main():
    interop_common.exit_on_signals()
    ap = argparse.ArgumentParser()
    ap.add_argument("--greeter", required=True)
    ap.add_argument("--interop", required=True)
    ap.add_argument("--peer", required=True)
    args = ap.parse_args()
    c = Checks()
    for kind in ("greeter", "interop"):
        for version in ("v1", "v1alpha"):
            run_server_checks(c, args, version, kind)
    run_bad_input(c, args)
    run_disabled(c, args)
    run_extensions(c, args)
    c.exit()


if __name__ == "__main__":
    main()
