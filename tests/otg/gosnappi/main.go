// A gosnappi client of `netrig serve`, built and run by tests/otg/test_gosnappi.py: the version
// check, a config with patterns and a capture, start, metrics until stopped, the capture, and a
// refused config. It prints one JSON object with what it saw.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/open-traffic-generator/snappi/gosnappi"
)

type report struct {
	ServerVersion string  `json:"server_version"`
	ClientVersion string  `json:"client_version"`
	FramesTx      uint64  `json:"frames_tx"`
	FramesRx      uint64  `json:"frames_rx"`
	LatencyAvgNs  float64 `json:"latency_avg_ns"`
	CaptureBytes  int     `json:"capture_bytes"`
	PortTx        uint64  `json:"port_tx"`
	Refusal       string  `json:"refusal"`
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}

func config(tx, rx string, frames uint32) gosnappi.Config {
	cfg := gosnappi.NewConfig()
	p1 := cfg.Ports().Add().SetName("p1").SetLocation(tx)
	p2 := cfg.Ports().Add().SetName("p2").SetLocation(rx)
	f := cfg.Flows().Add().SetName("go")
	f.TxRx().Port().SetTxName(p1.Name()).SetRxNames([]string{p2.Name()})
	f.Metrics().SetEnable(true).SetLoss(true)
	f.Metrics().Latency().SetEnable(true)
	f.Size().SetFixed(256)
	f.Rate().SetPps(20000)
	f.Duration().FixedPackets().SetPackets(frames)
	pkt := f.Packet()
	eth := pkt.Add().Ethernet()
	eth.Src().SetValue("02:00:00:00:00:01")
	eth.Dst().SetValue("02:00:00:00:00:02")
	pkt.Add().Vlan().Id().Increment().SetStart(10).SetStep(1).SetCount(4)
	ip := pkt.Add().Ipv4()
	ip.Src().SetValue("198.18.0.1")
	ip.Dst().SetValues([]string{"198.19.0.1", "198.19.0.2"})
	pkt.Add().Udp().SrcPort().SetValues([]uint32{1000, 2000, 3000})
	cfg.Captures().Add().SetName("c").SetPortNames([]string{p2.Name()}).SetFormat(gosnappi.CaptureFormat.PCAP)
	return cfg
}

func main() {
	location := flag.String("location", "", "the server's URL")
	tx := flag.String("tx", "", "the transmitting port's location")
	rx := flag.String("rx", "", "the receiving port's location")
	frames := flag.Uint("frames", 1000, "frames to send")
	flag.Parse()

	api := gosnappi.NewApi()
	api.NewHttpTransport().SetLocation(*location).SetVerify(false)
	api.SetVersionCompatibilityCheck(true)
	if err := api.CheckVersionCompatibility(); err != nil {
		fail("version check", err)
	}
	var out report
	remote, err := api.GetRemoteVersion()
	if err != nil {
		fail("version", err)
	}
	out.ServerVersion = remote.ApiSpecVersion()
	out.ClientVersion = api.GetLocalVersion().ApiSpecVersion()

	if _, err := api.SetConfig(config(*tx, *rx, uint32(*frames))); err != nil {
		fail("set_config", err)
	}
	cs := gosnappi.NewControlState()
	cs.Port().Capture().SetState(gosnappi.StatePortCaptureState.START).SetPortNames([]string{"p2"})
	if _, err := api.SetControlState(cs); err != nil {
		fail("capture start", err)
	}
	cs = gosnappi.NewControlState()
	cs.Traffic().FlowTransmit().SetState(gosnappi.StateTrafficFlowTransmitState.START)
	if _, err := api.SetControlState(cs); err != nil {
		fail("start", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req := gosnappi.NewMetricsRequest()
		req.Flow().SetFlowNames([]string{"go"})
		res, err := api.GetMetrics(req)
		if err != nil {
			fail("metrics", err)
		}
		m := res.FlowMetrics().Items()[0]
		if m.Transmit() == gosnappi.FlowMetricTransmit.STOPPED {
			out.FramesTx, out.FramesRx, out.LatencyAvgNs = m.FramesTx(), m.FramesRx(), m.Latency().AverageNs()
			break
		}
		if time.Now().After(deadline) {
			fail("metrics", fmt.Errorf("the flow did not stop"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cs = gosnappi.NewControlState()
	cs.Port().Capture().SetState(gosnappi.StatePortCaptureState.STOP).SetPortNames([]string{"p2"})
	if _, err := api.SetControlState(cs); err != nil {
		fail("capture stop", err)
	}
	pcap, err := api.GetCapture(gosnappi.NewCaptureRequest().SetPortName("p2"))
	if err != nil {
		fail("capture", err)
	}
	out.CaptureBytes = len(pcap)
	preq := gosnappi.NewMetricsRequest()
	preq.Port().SetPortNames([]string{"p1"})
	pres, err := api.GetMetrics(preq)
	if err != nil {
		fail("port metrics", err)
	}
	out.PortTx = pres.PortMetrics().Items()[0].FramesTx()

	refused := config(*tx, *rx, 1)
	refused.Devices().Add().SetName("d1").Ipv4Loopbacks().Add().SetName("lo").SetEthName("d1.eth")
	if _, err := api.SetConfig(refused); err != nil {
		out.Refusal = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("output", err)
	}
}
