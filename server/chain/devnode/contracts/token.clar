;; The SIP-010 fungible token that the devnode deploys at genesis
;; (devnode.Config.TokenAsset). It follows the SIP-010 part of the real sBTC
;; token (stacks-network/sbtc contracts/contracts/sbtc-token.clar) and adds a
;; mint that only the deployer may call; the sBTC protocol functions, the
;; locked token and transfer-many are left out.
;;
;; The devnode does not interpret this file: server/chain/devnode/token.go
;; implements the same rules in Go, and hack/clarity runs this file in the
;; real Clarity VM to check that the two agree. Change both together.

;; sBTC's error for moving a token one does not own.
(define-constant ERR_NOT_OWNER (err u4))
;; Only the deployer may mint.
(define-constant ERR_NOT_DEPLOYER (err u5))

(define-constant DEPLOYER tx-sender)

(define-fungible-token sbtc-token)

;; --- SIP-010

(define-public (transfer (amount uint) (sender principal) (recipient principal) (memo (optional (buff 34))))
	(begin
		(asserts! (or (is-eq tx-sender sender) (is-eq contract-caller sender)) ERR_NOT_OWNER)
		(try! (ft-transfer? sbtc-token amount sender recipient))
		(match memo to-print (print to-print) 0x)
		(ok true)
	)
)

(define-read-only (get-name)
	(ok "sBTC")
)

(define-read-only (get-symbol)
	(ok "sBTC")
)

(define-read-only (get-decimals)
	(ok u8)
)

(define-read-only (get-balance (who principal))
	(ok (ft-get-balance sbtc-token who))
)

(define-read-only (get-total-supply)
	(ok (ft-get-supply sbtc-token))
)

(define-read-only (get-token-uri)
	(ok none)
)

;; --- devnet only

(define-public (mint (amount uint) (recipient principal))
	(begin
		(asserts! (is-eq tx-sender DEPLOYER) ERR_NOT_DEPLOYER)
		(ft-mint? sbtc-token amount recipient)
	)
)
