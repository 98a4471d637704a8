"""A Plugin's services on a local insecure server, and a client for them."""

import os
import sys
from concurrent import futures

import grpc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dsh_plugin import pb  # noqa: E402

SERVICE = "/dsh.plugin.v1.Plugin/"


class Served:
    """plugin served on 127.0.0.1 with stubs for each RPC."""

    def __init__(self, plugin):
        self.stopped = False
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers(plugin.rpc_handlers(shutdown=self._stop))
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % port)

        def unary(name, req, resp):
            return self.channel.unary_unary(SERVICE + name, request_serializer=req.SerializeToString,
                                            response_deserializer=resp.FromString)
        self.describe = unary("Describe", pb.DescribeRequest, pb.DescribeResponse)
        self.configure = unary("Configure", pb.ConfigureRequest, pb.ConfigureResponse)
        self.emit = unary("Emit", pb.EmitRequest, pb.EmitResponse)
        self.emit_batch = unary("EmitBatch", pb.EmitBatchRequest, pb.EmitBatchResponse)
        self.execute_tool = unary("ExecuteTool", pb.ToolInvocation, pb.ToolOutcome)
        self.call = self.channel.stream_stream(SERVICE + "Call", request_serializer=pb.HostMessage.SerializeToString,
                                               response_deserializer=pb.PluginMessage.FromString)
        self.health = self.channel.unary_unary("/grpc.health.v1.Health/Check")
        self.shutdown = self.channel.unary_unary("/plugin.GRPCController/Shutdown")

    def _stop(self):
        self.stopped = True

    def close(self):
        self.channel.close()
        self.server.stop(0)
