package client_test

import (
	"github.com/idmint/idmint/client"
	"github.com/idmint/idmint/client/grpctransport"
)

func init() { client.SetGRPCDialers(grpctransport.Dialers(grpctransport.Settings{})) }
