package schemas

import (
	"encoding/json"
	"testing"
)

// Curves are written with their keys in numeric order and without the
// noise of the last bits.
func TestCurveJSON(t *testing.T) {
	c := Curve{"1": 0.09999999999999999, "2": 0.5, "10": 1, "11": 1.0 / 3}
	b, err := json.Marshal(TrialsRecord{PassAt: c, PassExp: Curve{}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		PassAt json.RawMessage `json:"passAt"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if want := `{"1":0.1,"2":0.5,"10":1,"11":0.333333333333333}`; string(got.PassAt) != want {
		t.Errorf("passAt = %s, want %s", got.PassAt, want)
	}
	e, _ := json.Marshal(EstimateCurve{"10": {K: 10}, "9": {K: 9}})
	if want := `{"9":{"k":9,"mean":0,"low":0,"high":0,"cases":0},"10":{"k":10,"mean":0,"low":0,"high":0,"cases":0}}`; string(e) != want {
		t.Errorf("estimate curve = %s", e)
	}
}
